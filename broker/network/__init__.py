"""The broker's network layer (Kafka's ``kafka.network``): the socket server and its acceptor, the sans-IO
connection and framing, connection quotas and the request memory pool, and the broker's own client side
(the inter-broker client and the batched inter-broker sender)."""
