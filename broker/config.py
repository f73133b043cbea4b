"""Broker configuration: one table of ``server.properties`` keys, as Kafka names them.

The table feeds parsing and validation (``odradek serve``), DescribeConfigs for the broker resource, and
docs/operations.md. Keys Kafka has that odradek accepts but does not act on (thread counts, SSL, quotas)
are listed as such so that a real ``server.properties`` starts cleanly; keys the table does not know are
warned about, and bad values stop the broker with a message naming the key.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Mapping, TypeVar

from odradek.protocol.values import TupleFields
from odradek.storage.config_types import ConfigKey, ConfigType, ConfigError, ConfigValue

log = logging.getLogger("odradek.config")

B, S, I, L, LIST, D, PW, C = (
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.LIST,
    ConfigType.DOUBLE,
    ConfigType.PASSWORD,
    ConfigType.CLASS,
)
INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
RACK_AWARE_REPLICA_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
"""``replica.selector.class``'s one valid value, Kafka's selector (broker/replication/replica_selector.py), named
here so that a start checks it without importing the selector, which only a broker that sets the key uses."""


_k = ConfigKey
"""Each row of the table below: ``_k(name, type, default, doc, at_least=..., valid=..., acted_on=...)``."""


BROKER_CONFIG: tuple[ConfigKey, ...] = (
    # identity and listeners
    _k("broker.id", I, -1, "The broker id for this server. If unset (-1), node.id is used, else 0 (the embedded single node)."),
    _k("node.id", I, -1, "The node id (KRaft name of broker.id); used when broker.id is unset."),
    _k("broker.rack", S, None, "Rack of the broker, reported in Metadata and DescribeCluster."),
    _k("listeners", S, "PLAINTEXT://127.0.0.1:9092", "Comma-separated list of URIs to listen on with listener names, e.g. PLAINTEXT://127.0.0.1:9092. Port 0 picks a free port."),
    _k("advertised.listeners", S, None, "Listeners to publish to clients if different from listeners."),
    _k("listener.security.protocol.map", S, "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL", "Map between listener names and security protocols."),
    _k("inter.broker.listener.name", S, None, "Name of the listener used for communication between brokers; unset: the listener of security.inter.broker.protocol."),
    _k("security.inter.broker.protocol", S, "PLAINTEXT", "Security protocol used to communicate between brokers (not to be set with inter.broker.listener.name).", valid=("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")),
    # TLS (listener.name.<listener>.ssl.* overrides any of these for one listener)
    _k("ssl.protocol", S, "TLSv1.3", "The SSL protocol used to generate the SSLContext; the versions offered are ssl.enabled.protocols'.", acted_on=False),
    _k("ssl.enabled.protocols", LIST, "TLSv1.2,TLSv1.3", "The list of protocols enabled for SSL connections."),
    _k("ssl.cipher.suites", LIST, "", "TLS 1.2 cipher suites (Kafka's TLS_..._WITH_... names or OpenSSL's); empty: OpenSSL's defaults. TLS 1.3 suites are OpenSSL's."),
    _k("ssl.keystore.type", S, "JKS", "The file format of the key store file: JKS, PKCS12 or PEM."),
    _k("ssl.keystore.location", S, None, "The location of the key store file (PEM: the private key and the certificate chain)."),
    _k("ssl.keystore.password", PW, None, "The store password for the key store file (not used with PEM); a JKS key entry's too, unless ssl.key.password is set."),
    _k("ssl.key.password", PW, None, "The password of the private key in the key store."),
    _k("ssl.keystore.certificate.chain", PW, None, "Certificate chain in PEM format, with ssl.keystore.key instead of ssl.keystore.location."),
    _k("ssl.keystore.key", PW, None, "Private key in PEM format (PKCS#8), with ssl.keystore.certificate.chain."),
    _k("ssl.truststore.type", S, "JKS", "The file format of the trust store file: JKS, PKCS12 or PEM."),
    _k("ssl.truststore.location", S, None, "The location of the trust store file: CA certificates client certificates are verified against."),
    _k("ssl.truststore.password", PW, None, "The password for the trust store file (not used with PEM)."),
    _k("ssl.truststore.certificates", PW, None, "Trusted certificates in PEM format, instead of ssl.truststore.location."),
    _k("ssl.client.auth", S, "none", "Whether client certificates are requested or required; a certificate's subject gives the principal.", valid=("required", "requested", "none")),
    _k("ssl.principal.mapping.rules", S, "DEFAULT", "Rules mapping a client certificate's distinguished name to a principal name (RULE:pattern/replacement/[LU], DEFAULT)."),
    _k("ssl.endpoint.identification.algorithm", S, "https", "Endpoint identification for the TLS connections this broker makes to other brokers: https checks the certificate's name against the host connected to; empty: not checked."),
    # SASL (listener.name.<listener>.<mechanism>.sasl.jaas.config for a listener's mechanism)
    _k("sasl.enabled.mechanisms", LIST, "GSSAPI", "SASL mechanisms enabled on SASL listeners: GSSAPI (Kerberos), PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER."),
    _k("sasl.mechanism.inter.broker.protocol", S, "GSSAPI", "SASL mechanism used for inter-broker communication."),
    _k("sasl.jaas.config", PW, None, "JAAS login context parameters for SASL connections, in JAAS configuration file format."),
    # Kafka's other SSL and SASL keys (dynamic per listener, as Kafka's DynamicListenerConfig): accepted and
    # described; odradek's TLS takes its context from the keys above, and it implements no Kerberos.
    _k("ssl.provider", S, None, "The name of the JCA security provider used for SSL connections (Java's).", acted_on=False),
    _k("ssl.keymanager.algorithm", S, "SunX509", "The key manager factory algorithm (Java's).", acted_on=False),
    _k("ssl.trustmanager.algorithm", S, "PKIX", "The trust manager factory algorithm (Java's).", acted_on=False),
    _k("ssl.secure.random.implementation", S, None, "The SecureRandom PRNG implementation (Java's).", acted_on=False),
    _k("ssl.engine.factory.class", C, None, "A class providing SSLEngine objects (Java's).", acted_on=False),
    _k("principal.builder.class", C, "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder", "The class building a connection's principal; odradek builds Kafka's default principals.", acted_on=False),
    _k("sasl.kerberos.service.name", S, None, "The Kerberos service name of the brokers: with sasl.mechanism.inter.broker.protocol=GSSAPI the broker's own connections to the others ask for <name>/<host> (unless the JAAS entry names serviceName)."),
    _k("sasl.kerberos.kinit.cmd", S, "/usr/bin/kinit", "Kerberos kinit command path (a broker serving GSSAPI reads its keytab; it runs no kinit).", acted_on=False),
    _k("sasl.kerberos.ticket.renew.window.factor", D, 0.8, "Kerberos ticket renewal point, as a fraction of its lifetime (for a login with a ticket cache; a broker serving GSSAPI accepts with its keytab).", acted_on=False),
    _k("sasl.kerberos.ticket.renew.jitter", D, 0.05, "Random jitter added to the Kerberos renewal time (for a login with a ticket cache).", acted_on=False),
    _k("sasl.kerberos.min.time.before.relogin", L, 60000, "Login thread sleep time between Kerberos refresh attempts (for a login with a ticket cache).", acted_on=False),
    _k("sasl.kerberos.principal.to.local.rules", LIST, "DEFAULT", "Rules mapping Kerberos principal names to the short names the authorizer sees (Kafka's DEFAULT and RULE:[n:format](regex)s/pattern/replacement/g/L)."),
    _k("sasl.login.refresh.window.factor", D, 0.8, "Login refresh point as a fraction of the credential's lifetime (OAUTHBEARER clients; not used by a broker that only validates).", acted_on=False),
    _k("sasl.login.refresh.window.jitter", D, 0.05, "Random jitter added to the login refresh time.", acted_on=False),
    _k("sasl.login.refresh.min.period.seconds", ConfigType.SHORT, 60, "The least time the login refresh thread waits between refreshes.", acted_on=False),
    _k("sasl.login.refresh.buffer.seconds", ConfigType.SHORT, 300, "Buffer time before credential expiration to keep when refreshing.", acted_on=False),
    _k("connections.max.reauth.ms", L, 0, "When positive, the most time an authenticated SASL session lasts: the client must re-authenticate (KIP-368) or be disconnected."),
    _k("connection.failed.authentication.delay.ms", I, 100, "Connection close delay on failed authentication.", at_least=0),
    _k("sasl.server.max.receive.size", I, 524288, "The maximum receive size allowed before and during initial SASL authentication.", at_least=1),
    # delegation tokens (KIP-48): enabled when a secret key is set
    _k("delegation.token.secret.key", PW, None, "The secret that signs delegation tokens (HMAC-SHA512 of the token id); the same on every broker. Unset or empty: delegation tokens are disabled."),
    _k("delegation.token.master.key", PW, None, "DEPRECATED: an alias for delegation.token.secret.key, read when that is unset."),
    _k("delegation.token.max.lifetime.ms", L, 604800000, "The longest a token lives, renewals included.", at_least=1),
    _k("delegation.token.expiry.time.ms", L, 86400000, "How long a token lives before it must be renewed, when the request names no period.", at_least=1),
    _k("delegation.token.expiry.check.interval.ms", L, 3600000, "How often expired tokens are removed (by the controller in a ZooKeeper cluster).", at_least=1),
    # OAUTHBEARER (each also as listener.name.<listener>.oauthbearer.<key>)
    _k("sasl.login.callback.handler.class", C, None, "How the broker's own OAUTHBEARER connections get their token: org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler from sasl.oauthbearer.token.endpoint.url; unset: an unsecured token made from the JAAS entry's unsecuredLogin* options."),
    _k("sasl.oauthbearer.token.endpoint.url", S, None, "Where the secured OAUTHBEARER login handler gets its token: a file: URL holding it (read at each login) or an http(s) endpoint answering the client credentials grant of the JAAS clientId, clientSecret and scope."),
    _k("sasl.server.callback.handler.class", C, None, "The SASL server's callback handler. For OAUTHBEARER: org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler validates signed tokens against sasl.oauthbearer.jwks.endpoint.url; unset: Kafka's unsecured validator (unsigned tokens)."),
    _k("sasl.oauthbearer.jwks.endpoint.url", S, None, "The JWKS (JSON Web Key Set) whose keys sign OAUTHBEARER tokens: a file: URL (read once at start-up) or an http(s) endpoint (fetched at start-up and refreshed; its TLS truststore in the listener's JAAS options, ssl.truststore.*)."),
    _k("sasl.oauthbearer.jwks.endpoint.refresh.ms", L, 3600000, "How often a JWKS fetched over HTTP(S) is fetched again (a token naming an unknown key id has it fetched at once, at most once a minute per id)."),
    _k("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", L, 100, "The first wait between attempts to fetch an HTTP(S) JWKS (doubling after each failure)."),
    _k("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", L, 10000, "How long failed attempts to fetch an HTTP(S) JWKS are retried before the keys are left as they were."),
    _k("sasl.oauthbearer.clock.skew.seconds", I, 30, "Seconds of leeway for the token's exp and nbf against the broker's clock."),
    _k("sasl.oauthbearer.expected.audience", LIST, None, "The audiences of which a token's aud must name one; unset: a token with an aud claim is refused (as jose4j does for Kafka)."),
    _k("sasl.oauthbearer.expected.issuer", S, None, "The issuer a token's iss must equal; unset: not checked."),
    _k("sasl.oauthbearer.scope.claim.name", S, "scope", "The claim holding the token's scope."),
    _k("sasl.oauthbearer.sub.claim.name", S, "sub", "The claim naming the token's principal."),
    _k("inter.broker.protocol.version", S, "3.9-IV0", "Inter-broker protocol version.", acted_on=False),
    _k("cluster.id", S, None, "odradek: cluster id to use when the log directories carry none (Kafka takes it from ZooKeeper or meta.properties)."),
    # authorization
    _k("authorizer.class.name", S, "", "The authorizer: empty for none (everything allowed, the ACL APIs answer SECURITY_DISABLED), or kafka.security.authorizer.AclAuthorizer (ACLs kept with the cluster metadata)."),
    _k("super.users", S, None, "AclAuthorizer: semicolon-separated principals (User:admin;User:ops) allowed everything from every host."),
    _k("allow.everyone.if.no.acl.found", B, False, "AclAuthorizer: a resource no ACL matches is open to everyone (else to super users only)."),
    # connection limits
    _k("max.connections", I, INT_MAX, "The maximum number of connections the broker allows at any time; at the limit it stops accepting until one closes (the inter-broker listener is exempt).", at_least=0),
    _k("max.connections.per.ip", I, INT_MAX, "The maximum number of connections from each IP address; more are closed at once.", at_least=0),
    _k("max.connection.creation.rate", I, INT_MAX, "The most connections the broker (or, as listener.name.<listener>.max.connection.creation.rate, a listener) accepts per second, averaged over the quota window; faster connections wait to be accepted (the inter-broker listener counts only against its own).", at_least=0),
    _k("max.connections.per.ip.overrides", S, "", "A comma-separated list of per-ip or hostname overrides to the default maximum number of connections, e.g. hostName:100,127.0.0.1:200."),
    # client quotas
    _k("quota.window.num", I, 11, "The number of samples to retain in memory for client quotas.", at_least=1),
    _k("quota.window.size.seconds", I, 1, "The time span of each sample for client quotas.", at_least=1),
    _k("replication.quota.window.num", I, 11, "The number of samples to retain in memory for replication quotas.", at_least=1),
    _k("replication.quota.window.size.seconds", I, 1, "The time span of each sample for replication quotas.", at_least=1),
    # tiered storage (not implemented): its dynamic keys, accepted and described
    _k("remote.log.index.file.cache.total.size.bytes", L, 1073741824, "The total size of the space allocated to store remote index files (tiered storage, not implemented).", at_least=1, acted_on=False),
    _k("remote.fetch.max.wait.ms", I, 500, "The longest wait for remote data to fill a fetch (tiered storage, not implemented).", at_least=1, acted_on=False),
    _k("remote.log.manager.copy.max.bytes.per.second", L, LONG_MAX, "The most bytes per second copied to remote storage (tiered storage, not implemented).", at_least=1, acted_on=False),
    _k("remote.log.manager.fetch.max.bytes.per.second", L, LONG_MAX, "The most bytes per second read from remote storage (tiered storage, not implemented).", at_least=1, acted_on=False),
    # metrics
    _k("metric.reporters", LIST, "", "Classes Kafka notifies of new metrics (Java's); odradek exports its metrics at prometheus.port.", acted_on=False),
    _k("prometheus.port", I, None, "odradek: port of the Prometheus endpoint, http://host:port/metrics, with Kafka's MBeans under the names the Prometheus JMX exporter gives them (docs/operations.md). Unset: off; 0 picks a free port. Strimzi's JMX exporter uses 9404.", at_least=0),
    _k("prometheus.host", S, None, "odradek: interface the Prometheus endpoint binds; unset: the first listener's host (all interfaces if that is empty)."),
    # web console (tools/console, docs/console.md)
    _k("console.listener", S, None, "odradek: URL the web console serves on, e.g. http://127.0.0.1:9644 (docs/console.md); it shows the whole cluster through this broker's first listener. Unset: off. An address other than loopback needs console.basic.auth.user or console.bearer.token."),
    _k("console.client.config", S, None, "odradek: a Kafka client properties file (security.protocol, sasl.*, ssl.*) the console connects with: it sees what that principal may see. Unset: a plaintext connection without SASL."),
    _k("console.basic.auth.user", S, None, "odradek: user name the console asks for with HTTP basic authentication (with console.basic.auth.password)."),
    _k("console.basic.auth.password", PW, None, "odradek: password of console.basic.auth.user."),
    _k("console.bearer.token", PW, None, "odradek: a token the console accepts as 'Authorization: Bearer <token>' (or basic authentication's password)."),
    # ZooKeeper (cluster mode)
    _k("zookeeper.connect", S, None, "ZooKeeper connection string (host:port[,host:port][/chroot]). Unset: the embedded single-node controller."),
    _k("zookeeper.session.timeout.ms", I, 18000, "ZooKeeper session timeout."),
    _k("zookeeper.connection.timeout.ms", I, None, "Maximum time to wait to establish a ZooKeeper connection; defaults to the session timeout."),
    _k("controlled.shutdown.enable", B, True, "Enable controlled shutdown of the server: in ZooKeeper mode a stopping broker first asks the controller to move its leaderships."),
    _k("controlled.shutdown.max.retries", I, 3, "Controlled shutdown can fail for multiple reasons. This determines the number of retries when such failure happens.", at_least=0),
    _k("controlled.shutdown.retry.backoff.ms", L, 5000, "Before each retry, the system needs time to recover from the state that caused the previous failure (Controller fail over, replica lag etc). This config determines the amount of time to wait before retrying.", at_least=0),
    _k("controller.socket.timeout.ms", I, 30000, "Socket timeout for controller-to-broker channels.", acted_on=False),
    # sockets and requests
    _k("socket.request.max.bytes", I, 104857600, "The maximum number of bytes in a socket request.", at_least=1),
    _k("socket.send.buffer.bytes", I, 102400, "SO_SNDBUF of server sockets; -1 uses the OS default."),
    _k("socket.receive.buffer.bytes", I, 102400, "SO_RCVBUF of server sockets; -1 uses the OS default."),
    _k("socket.listen.backlog.size", I, 50, "Maximum number of pending connections on the socket.", at_least=1),
    _k("connections.max.idle.ms", L, 600000, "Idle connections timeout: connections idle longer than this are closed."),
    _k("num.network.threads", I, 3, "Kafka's network thread count; odradek's is worker.processes (a worker process is network and handler both).", at_least=1, acted_on=False),
    _k("num.io.threads", I, 8, "Kafka's request handler thread count; odradek's is worker.processes (a worker process is network and handler both).", at_least=1, acted_on=False),
    _k("worker.processes", I, 1, "odradek: how many processes odradek serve runs (docs/multicore.md): 1 is one process; N > 1 a supervisor that accepts and hands each connection to the worker with the fewest, worker 0 being the whole broker and the others forwarding its requests to it (and sending fetched records with sendfile); 0 is one per core available. Plaintext and SASL_PLAINTEXT listeners only.", at_least=0),
    _k("worker.placement", S, "fewest", "odradek: with worker.processes > 1, which worker the supervisor hands each new connection to: fewest, the live worker holding the fewest connections; fronts, the front (a worker other than 0) holding the fewest, worker 0 (which does every request's stateful work) only when no front is live (docs/multicore.md).", valid=("fewest", "fronts")),
    _k("background.threads", I, 10, "The number of threads to use for various background processing tasks; odradek runs them on its event loop and worker threads.", at_least=1, acted_on=False),
    _k("num.replica.fetchers", I, 1, "Number of fetcher threads used to replicate records from each source broker.", at_least=1),
    _k("num.recovery.threads.per.data.dir", I, 2, "Threads per data directory for log recovery at startup.", at_least=1, acted_on=False),
    _k("queued.max.requests", I, 500, "Queued requests allowed per connection before reading stops.", at_least=1),
    _k("queued.max.request.bytes", L, -1, "The number of queued bytes allowed before no more requests are read; -1: no bound but socket.request.max.bytes per request."),
    _k("request.timeout.ms", I, 30000, "Upper bound for waiting on delayed operations without a timeout of their own (the transaction coordinator's log writes and transaction markers)."),
    # topics
    _k("auto.create.topics.enable", B, True, "Enable auto creation of topic on the server (Metadata and Produce for unknown topics)."),
    _k("num.partitions", I, 1, "The default number of log partitions per topic.", at_least=1),
    _k("default.replication.factor", I, 1, "The default replication factor for automatically created topics.", at_least=1),
    _k("delete.topic.enable", B, True, "Enables delete topic. Delete topic through the admin tool has no effect if this config is turned off."),
    _k("message.max.bytes", I, 1048588, "The largest record batch size allowed by Kafka (after compression if compression is enabled).", at_least=0),
    _k("compression.type", S, "producer", "Final compression type for a given topic.", valid=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
    _k("min.insync.replicas", I, 1, "Minimum number of in-sync replicas required for acks=all.", at_least=1),
    _k("unclean.leader.election.enable", B, False, "Allow replicas not in the ISR to be elected leader as a last resort."),
    _k("replica.lag.time.max.ms", L, 30000, "A follower that has not caught up with the leader for this long leaves the ISR."),
    _k(
        "replica.selector.class", C, None,
        "The leader's choice of a replica for a consumer to fetch from (KIP-392): org.apache.kafka.common.replica.RackAwareReplicaSelector, a replica in the consumer's client.rack; unset: none is preferred, though any replica serves a consumer that fetches from it.",
        valid=(RACK_AWARE_REPLICA_SELECTOR,),
    ),
    _k("replica.fetch.max.bytes", I, 1048576, "Bytes of messages a follower fetches per partition.", at_least=0),
    _k("replica.fetch.wait.max.ms", I, 500, "Max wait time for each fetcher request issued by follower replicas; at most replica.socket.timeout.ms and replica.lag.time.max.ms."),
    _k("replica.fetch.min.bytes", I, 1, "Minimum bytes expected for each fetch response. If not enough bytes, wait up to replica.fetch.wait.max.ms."),
    _k("replica.fetch.response.max.bytes", I, 10485760, "Maximum bytes expected for the entire fetch response; the first record batch of the first non-empty partition comes whatever its size.", at_least=0),
    _k("replica.fetch.backoff.ms", I, 1000, "The amount of time to sleep when fetch partition error occurs.", at_least=0),
    _k("replica.socket.timeout.ms", I, 30000, "The socket timeout for network requests of the replica fetchers. Its value should be at least replica.fetch.wait.max.ms."),
    _k("auto.leader.rebalance.enable", B, True, "Enables automatic preferred-leader balancing."),
    _k("leader.imbalance.per.broker.percentage", I, 10, "Leader imbalance allowed per broker, in percent."),
    _k("leader.imbalance.check.interval.seconds", L, 300, "Frequency of the partition rebalance check by the controller."),
    # log
    _k("log.dirs", S, None, "A comma-separated list of the directories where the log data is stored. If not set, log.dir is used."),
    _k("log.dir", S, "/tmp/kafka-logs", "The directory in which the log data is kept (supplemental for log.dirs)."),
    _k("log.segment.bytes", I, 1073741824, "The maximum size of a single log file.", at_least=14),
    _k("log.roll.ms", L, None, "Maximum time before a new log segment is rolled out (ms); if unset log.roll.hours is used."),
    _k("log.roll.hours", I, 168, "Maximum time before a new log segment is rolled out (hours).", at_least=1),
    _k("log.roll.jitter.ms", L, None, "Maximum jitter subtracted from logRollTimeMillis (ms)."),
    _k("log.roll.jitter.hours", I, 0, "Maximum jitter subtracted from logRollTimeMillis (hours).", at_least=0),
    _k("log.retention.ms", L, None, "Milliseconds to keep a log file before deleting it; -1 means no limit. If unset, log.retention.minutes."),
    _k("log.retention.minutes", I, None, "Minutes to keep a log file before deleting it; if unset, log.retention.hours."),
    _k("log.retention.hours", I, 168, "Hours to keep a log file before deleting it."),
    _k("log.retention.bytes", L, -1, "The maximum size of the log before deleting it."),
    _k("log.retention.check.interval.ms", L, 300000, "How often the log cleaner checks whether any log is eligible for deletion.", at_least=1),
    _k("log.segment.delete.delay.ms", L, 60000, "The amount of time to wait before deleting a file from the filesystem.", at_least=0),
    _k("log.flush.interval.messages", L, LONG_MAX, "Messages accumulated on a log partition before messages are flushed to disk.", at_least=1),
    _k("log.flush.interval.ms", L, None, "Maximum time a message stays in memory before being flushed; if unset, log.flush.scheduler.interval.ms."),
    _k("log.flush.scheduler.interval.ms", L, LONG_MAX, "How often the log flusher checks whether any log needs flushing."),
    _k("log.flush.offset.checkpoint.interval.ms", I, 60000, "How often the recovery point checkpoint is written.", at_least=0),
    _k("log.flush.start.offset.checkpoint.interval.ms", I, 60000, "How often the log start offset checkpoint is written.", at_least=0, acted_on=False),
    _k("replica.high.watermark.checkpoint.interval.ms", L, 5000, "How often the high watermark is saved to disk."),
    _k("log.index.size.max.bytes", I, 10485760, "The maximum size in bytes of the offset index.", at_least=4),
    _k("log.index.interval.bytes", I, 4096, "The interval with which an entry is added to the offset index.", at_least=0),
    _k("log.preallocate", B, False, "Preallocate the file when creating a new segment."),
    _k("log.cleanup.policy", LIST, "delete", "The default cleanup policy for segments beyond the retention window.", valid=("compact", "delete")),
    _k("log.cleaner.enable", B, True, "Enable the log cleaner process (compaction)."),
    _k("log.cleaner.backoff.ms", L, 15000, "The amount of time to sleep when there are no logs to clean (odradek checks at most once a second).", at_least=0),
    _k("log.cleaner.threads", I, 1, "The number of background threads to use for log cleaning; odradek cleans one log at a time on a worker thread.", at_least=0, acted_on=False),
    _k("log.cleaner.dedupe.buffer.size", L, 134217728, "The total memory used for log deduplication across all cleaner threads (24 bytes a key, as in Kafka)."),
    _k("log.cleaner.io.buffer.load.factor", D, 0.9, "Log cleaner dedupe buffer load factor: the percentage full the dedupe buffer can become."),
    _k("log.cleaner.io.buffer.size", I, 524288, "The total memory used for log cleaner I/O buffers across all cleaner threads.", at_least=0, acted_on=False),
    _k("log.cleaner.io.max.bytes.per.second", D, 1.7976931348623157e308, "The log cleaner will be throttled so that the sum of its read and write i/o will be less than this value on average.", acted_on=False),
    _k("log.cleaner.delete.retention.ms", L, 86400000, "How long delete records (tombstones) are retained.", at_least=0),
    _k("log.cleaner.min.compaction.lag.ms", L, 0, "The minimum time a message remains uncompacted in the log.", at_least=0),
    _k("log.cleaner.max.compaction.lag.ms", L, LONG_MAX, "The maximum time a message remains ineligible for compaction.", at_least=1),
    _k("log.cleaner.min.cleanable.ratio", D, 0.5, "Minimum ratio of dirty log to total log for a log to be eligible for cleaning."),
    _k("log.message.timestamp.type", S, "CreateTime", "Whether the timestamp in the message is create time or log append time.", valid=("CreateTime", "LogAppendTime")),
    _k("log.message.timestamp.difference.max.ms", L, LONG_MAX, "Deprecated: maximum difference between the broker's time and a message's timestamp.", at_least=0),
    _k("log.message.timestamp.before.max.ms", L, LONG_MAX, "Maximum allowed difference before the broker's timestamp.", at_least=0),
    _k("log.message.timestamp.after.max.ms", L, LONG_MAX, "Maximum allowed difference after the broker's timestamp.", at_least=0),
    _k("log.message.downconversion.enable", B, True, "Whether down-conversion of message formats is enabled for consumer requests."),
    _k("log.message.format.version", S, "3.0-IV1", "Deprecated since 3.0: the message format is always v2.", acted_on=False),
    _k("log.local.retention.ms", L, -2, "Local retention for tiered storage (-2: use retention.ms).", acted_on=False),
    _k("log.local.retention.bytes", L, -2, "Local retention bytes for tiered storage (-2: use retention.bytes).", acted_on=False),
    # groups and offsets
    _k("offsets.topic.num.partitions", I, 50, "The number of partitions for the offset commit topic (should not change after deployment).", at_least=1),
    _k("offsets.topic.replication.factor", I, 1, "Replication factor of the offsets topic. Kafka's default is 3; odradek's is 1 because its default is a single node (Kafka's shipped server.properties sets 1 too).", at_least=1),
    _k("offsets.topic.segment.bytes", I, 104857600, "The offsets topic segment bytes should be kept relatively small for faster loading.", at_least=1),
    _k("offsets.topic.compression.codec", I, 0, "Compression codec for the offsets topic."),
    _k("offsets.retention.minutes", I, 10080, "Committed offsets of a group that became empty are kept for this long.", at_least=1),
    _k("offsets.retention.check.interval.ms", L, 600000, "Frequency at which to check for stale offsets.", at_least=1),
    _k("offsets.commit.timeout.ms", I, 5000, "Offset commit will be delayed until all replicas for the offsets topic receive the commit or this timeout is reached.", at_least=1),
    _k("offset.metadata.max.bytes", I, 4096, "The maximum size for a metadata entry associated with an offset commit."),
    _k("offsets.load.buffer.size", I, 5242880, "Batch size for reading from the offsets segments when loading offsets into the cache.", at_least=1),
    _k("group.initial.rebalance.delay.ms", I, 3000, "Time the coordinator waits for more members to join a new group before the first rebalance."),
    _k("group.min.session.timeout.ms", I, 6000, "The minimum allowed session timeout for registered consumers."),
    _k("group.max.session.timeout.ms", I, 1800000, "The maximum allowed session timeout for registered consumers."),
    _k("group.max.size", I, INT_MAX, "The maximum number of consumers that a single consumer group can accommodate.", at_least=1),
    _k("group.consumer.heartbeat.interval.ms", I, 5000, "The heartbeat interval given to the members of a consumer group (KIP-848 consumer protocol).", at_least=1),
    _k("group.consumer.session.timeout.ms", I, 45000, "The timeout to detect client failures when using the consumer group protocol.", at_least=1),
    _k("group.consumer.min.session.timeout.ms", I, 45000, "The minimum allowed session timeout for registered consumers (consumer group protocol).", at_least=1),
    _k("group.consumer.max.session.timeout.ms", I, 60000, "The maximum allowed session timeout for registered consumers (consumer group protocol).", at_least=1),
    _k("group.consumer.min.heartbeat.interval.ms", I, 5000, "The minimum heartbeat interval for registered consumers (consumer group protocol).", at_least=1),
    _k("group.consumer.max.heartbeat.interval.ms", I, 15000, "The maximum heartbeat interval for registered consumers (consumer group protocol).", at_least=1),
    _k("group.consumer.max.size", I, INT_MAX, "The maximum number of consumers that a single consumer group (consumer protocol) can accommodate.", at_least=1),
    _k("group.consumer.migration.policy", S, "bidirectional", "The config that enables converting the non-empty classic group using the consumer embedded protocol to the non-empty consumer group using the consumer group protocol and vice versa; conversions of empty groups in both directions are always enabled regardless of this policy. bidirectional: both upgrade from classic group to consumer group and downgrade from consumer group to classic group are enabled, upgrade: only upgrade is enabled, downgrade: only downgrade is enabled, disabled: neither upgrade nor downgrade is enabled."),
    _k("group.consumer.assignors", LIST, "uniform,range", "The server-side assignors of the consumer group protocol, by name (uniform, range) or Kafka's class name; the first is the default."),
    # share groups (KIP-932) and the share coordinator
    _k("group.share.record.lock.duration.ms", I, 30000, "How long a share group's consumer holds the records it acquired before they are delivered again.", at_least=1000),
    _k("group.share.min.record.lock.duration.ms", I, 15000, "The least a share group's share.record.lock.duration.ms may be.", at_least=1000),
    _k("group.share.max.record.lock.duration.ms", I, 60000, "The most a share group's share.record.lock.duration.ms may be.", at_least=1000),
    _k("group.share.delivery.count.limit", I, 5, "How many times a record of a share group is delivered before it is archived.", at_least=2),
    _k("group.share.partition.max.record.locks", I, 2000, "The most records of a share partition in flight (acquired or awaiting redelivery) at once.", at_least=100),
    _k("group.share.session.timeout.ms", I, 45000, "A share group member that sends no heartbeat for this long is removed.", at_least=1),
    _k("group.share.heartbeat.interval.ms", I, 5000, "How often share group members are told to heartbeat.", at_least=1),
    _k("group.share.min.session.timeout.ms", I, 45000, "The least session timeout a share group may have.", at_least=1),
    _k("group.share.max.session.timeout.ms", I, 60000, "The most session timeout a share group may have.", at_least=1),
    _k("group.share.min.heartbeat.interval.ms", I, 5000, "The least heartbeat interval a share group may have.", at_least=1),
    _k("group.share.max.heartbeat.interval.ms", I, 15000, "The most heartbeat interval a share group may have.", at_least=1),
    _k("group.share.max.size", I, 200, "The most members a share group may have.", at_least=1),
    _k("group.share.max.share.sessions", I, 2000, "The most share sessions the broker keeps.", at_least=1),
    _k("share.coordinator.state.topic.num.partitions", I, 50, "The number of partitions of __share_group_state (should not change after deployment).", at_least=1),
    _k("share.coordinator.state.topic.replication.factor", I, 1, "Replication factor of __share_group_state (Kafka's default 3; 1 here, as for the offsets topic).", at_least=1),
    _k("share.coordinator.state.topic.min.isr", I, 1, "min.insync.replicas of __share_group_state (Kafka's default 2; 1 here, as the replication factor).", at_least=1),
    _k("share.coordinator.state.topic.segment.bytes", I, 104857600, "The segment size of __share_group_state.", at_least=1),
    _k("share.coordinator.snapshot.update.records.per.snapshot", I, 500, "How many ShareUpdate records follow a ShareSnapshot before the share coordinator writes the next snapshot.", at_least=0),
    _k("share.coordinator.load.buffer.size", I, 5242880, "Batch size for reading __share_group_state when loading share-partition state.", at_least=1),
    _k("share.coordinator.write.timeout.ms", I, 5000, "How long a share-state write waits for its replicas.", at_least=1),
    # producers and transactions
    _k("transaction.state.log.num.partitions", I, 50, "The number of partitions for the transaction topic (should not change after deployment).", at_least=1),
    _k("transaction.state.log.replication.factor", I, 1, "Replication factor of the transaction topic (Kafka's default 3; 1 here, as for offsets).", at_least=1),
    _k("transaction.state.log.min.isr", I, 1, "min.insync.replicas for the transaction topic (Kafka's default 2; 1 here, as the replication factor).", at_least=1),
    _k("transaction.state.log.segment.bytes", I, 104857600, "The transaction topic segment bytes should be kept relatively small in order to facilitate faster log compaction and cache loads.", at_least=1),
    _k("transaction.state.log.load.buffer.size", I, 5242880, "Batch size for reading from the transaction log segments when loading producer ids and transactions into the cache.", at_least=1),
    _k("transactional.id.expiration.ms", I, 604800000, "The time in ms that the transaction coordinator will wait without receiving any transaction status updates for the current transaction before expiring its transactional id.", at_least=1),
    _k("transaction.max.timeout.ms", I, 900000, "The maximum allowed timeout for transactions; a client asking for more gets INVALID_TRANSACTION_TIMEOUT from InitProducerId.", at_least=1),
    _k("transaction.abort.timed.out.transaction.cleanup.interval.ms", I, 10000, "The interval at which to rollback transactions that have timed out.", at_least=1),
    _k("transaction.remove.expired.transaction.cleanup.interval.ms", I, 3600000, "The interval at which to remove transactions that have expired due to transactional.id.expiration.ms passing.", at_least=1),
    _k("transaction.partition.verification.enable", B, True, "Enable verification that checks that the partition has been added to the transaction before writing transactional records to the partition."),
    _k("producer.id.expiration.ms", I, 86400000, "Time a producer id may be idle before the broker forgets its state.", at_least=1),
    _k("max.incremental.fetch.session.cache.slots", I, 1000, "The maximum number of incremental fetch sessions that we will maintain.", at_least=0),
    _k("fetch.max.bytes", I, 57671680, "The maximum number of bytes returned for a fetch request.", at_least=1024),
    _k("fetch.purgatory.purge.interval.requests", I, 1000, "Purge interval of the fetch purgatory.", acted_on=False),
    _k("producer.purgatory.purge.interval.requests", I, 1000, "Purge interval of the producer purgatory.", acted_on=False),
)

BROKER_KEYS: dict[str, ConfigKey] = {k.name: k for k in BROKER_CONFIG}

# Prefixes of Kafka keys that odradek accepts silently (security, metrics, quotas, KRaft, tiered storage).
IGNORED_PREFIXES = ("ssl.", "sasl.", "security.", "metric", "kafka.metrics", "quota.", "client.quota", "controller.", "process.roles", "remote.", "authorizer.", "super.users", "principal.", "listener.name.", "max.connections", "delegation.token", "share.", "password.encoder")


class Listener(TupleFields):
    name: str
    host: str
    port: int


def parse_listeners(value: str) -> list[Listener]:
    """``NAME://host:port,...`` as Kafka writes listeners (an empty host means all interfaces)."""
    out = []
    for item in filter(None, (p.strip() for p in value.split(","))):
        if "://" not in item:
            raise ConfigError(f"Invalid listener {item!r}: expected NAME://host:port")
        name, rest = item.split("://", 1)
        host, sep, port = rest.rpartition(":")
        if not sep or not port.lstrip("-").isdigit():
            raise ConfigError(f"Invalid listener {item!r}: no port")
        host = host.strip("[]")
        out.append(Listener(name.upper(), host, int(port)))
    names = [l.name for l in out]
    if len(set(names)) != len(names):
        raise ConfigError(f"Each listener must have a different name, got {value!r}")
    return out


KEY_ORDER: tuple[tuple[str, str, str], ...] = tuple(
    check
    for group in ("consumer", "share")
    for check in (
        (f"group.{group}.max.heartbeat.interval.ms", ">=", f"group.{group}.min.heartbeat.interval.ms"),
        (f"group.{group}.heartbeat.interval.ms", ">=", f"group.{group}.min.heartbeat.interval.ms"),
        (f"group.{group}.heartbeat.interval.ms", "<=", f"group.{group}.max.heartbeat.interval.ms"),
        (f"group.{group}.max.session.timeout.ms", ">=", f"group.{group}.min.session.timeout.ms"),
        (f"group.{group}.session.timeout.ms", ">=", f"group.{group}.min.session.timeout.ms"),
        (f"group.{group}.session.timeout.ms", "<=", f"group.{group}.max.session.timeout.ms"),
        (f"group.{group}.heartbeat.interval.ms", "<", f"group.{group}.session.timeout.ms"),
    )
)
"""Keys whose values must keep an order, checked at start-up as Kafka's GroupCoordinatorConfig does (with its
messages): a consumer or share group's heartbeat interval and session timeout within their bounds, the
interval shorter than the session."""

_ORDER_CHECKS = {
    ">=": (lambda a, b: a >= b, "must be greater than or equal to"),
    "<=": (lambda a, b: a <= b, "must be less than or equal to"),
    "<": (lambda a, b: a < b, "must be less than"),
}

T = TypeVar("T")


def _of_type(value: ConfigValue, kind: type[T], name: str) -> T:
    """``value``, which its key's declared type makes a ``kind``: anything else is a lookup of the wrong key."""
    if not isinstance(value, kind):
        raise TypeError(f"{name} is not a {kind.__name__} key (its value: {value!r})")
    return value


class BrokerConfig:
    """Parsed broker configuration: the values of every key in the table, from properties and overrides."""

    def __init__(self, props: Mapping[str, str] | None = None, *, warn_unknown: bool = True) -> None:
        """``warn_unknown`` is off when the dynamic configuration rebuilds the running one from the same file."""
        self.originals: dict[str, str] = dict(props or {})
        self.values: dict[str, Any] = {}
        for key in BROKER_CONFIG:
            raw = self.originals.get(key.name)
            self.values[key.name] = key.default if raw is None else key.parse(raw)
        for name in self.originals if warn_unknown else ():
            if name not in BROKER_KEYS and not name.startswith(IGNORED_PREFIXES):
                log.warning("Unknown configuration %r was supplied but isn't a known config.", name)
        if 0 < self["queued.max.request.bytes"] < self["socket.request.max.bytes"]:
            raise ConfigError("queued.max.request.bytes must be larger or equal to socket.request.max.bytes")
        if self["replica.fetch.wait.max.ms"] > self["replica.socket.timeout.ms"]:
            raise ConfigError("replica.socket.timeout.ms should always be at least replica.fetch.wait.max.ms to prevent unnecessary socket timeouts")
        if self["replica.fetch.wait.max.ms"] > self["replica.lag.time.max.ms"]:
            raise ConfigError("replica.fetch.wait.max.ms should always be less than or equal to replica.lag.time.max.ms to prevent frequent changes in ISR")
        for left, relation, right in KEY_ORDER:
            holds, words = _ORDER_CHECKS[relation]
            if not holds(self[left], self[right]):
                raise ConfigError(f"{left} {words} {right}")
        self.listeners = parse_listeners(self["listeners"])
        if not self.listeners:
            raise ConfigError("listeners must name at least one listener")
        advertised = self["advertised.listeners"]
        self.advertised_listeners = parse_listeners(advertised) if advertised else self.listeners

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    @classmethod
    def load(cls, path: str | Path | None = None, overrides: Mapping[str, str] | None = None) -> "BrokerConfig":
        props: dict[str, str] = {}
        if path is not None:
            props.update(read_properties(Path(path)))
        props.update(overrides or {})
        return cls(props)

    @property
    def broker_id(self) -> int:
        if self["broker.id"] >= 0:
            return self["broker.id"]
        return self["node.id"] if self["node.id"] >= 0 else 0

    @property
    def log_dirs(self) -> list[Path]:
        dirs = self["log.dirs"] or self["log.dir"]
        return [Path(d.strip()) for d in dirs.split(",") if d.strip()]

    def is_set(self, name: str) -> bool:
        return name in self.originals

    def for_listener(self, listener: str, name: str, prefix: str = "") -> ConfigValue:
        """A key's value for one listener: ``listener.name.<listener>.<prefix><name>`` if set, as Kafka's
        listener-prefixed configs override the broker-wide one; else the broker-wide value."""
        raw = self.originals.get(f"listener.name.{listener.lower()}.{prefix}{name}")
        key = BROKER_KEYS[name]
        if raw is None:
            value = self.values[name]
            return key.parse(value) if key.type is ConfigType.LIST and isinstance(value, str) else value  # a LIST default is its string
        return key.parse(raw)

    def int_for_listener(self, listener: str, name: str, prefix: str = "") -> int:
        """:meth:`for_listener` of an INT, SHORT or LONG key."""
        return _of_type(self.for_listener(listener, name, prefix), int, name)

    def str_for_listener(self, listener: str, name: str, prefix: str = "") -> str | None:
        """:meth:`for_listener` of a STRING, CLASS or PASSWORD key (None when unset)."""
        value = self.for_listener(listener, name, prefix)
        return None if value is None else _of_type(value, str, name)

    def list_for_listener(self, listener: str, name: str, prefix: str = "") -> list[str]:
        """:meth:`for_listener` of a LIST key (empty when unset)."""
        value = self.for_listener(listener, name, prefix)
        return [] if value is None else _of_type(value, list, name)

    def broker_defaults_for_topics(self) -> dict[str, str]:
        """The ``log.*``-style broker keys, as strings, that topic configs fall back to."""
        return {k: str(v) for k, v in self.originals.items()}

    def describe(self) -> list[tuple[ConfigKey, Any, bool]]:
        """(key, value, is_default) for DescribeConfigs of the broker resource."""
        return [(k, self.values[k.name], k.name not in self.originals) for k in BROKER_CONFIG]


def read_properties(path: Path) -> dict[str, str]:
    """Java ``.properties`` as Kafka's config files use them: ``key=value`` or ``key: value``, ``#``/``!`` comments,
    backslash line continuations."""
    props: dict[str, str] = {}
    pending = ""
    for raw in path.read_text().splitlines():
        line = pending + raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        for i, ch in enumerate(line):
            if ch in "=:" or ch.isspace():
                key, value = line[:i], line[i + 1 :].strip()
                if ch.isspace() and value[:1] in ("=", ":"):
                    value = value[1:].strip()
                break
        else:
            key, value = line, ""
        props[key.strip()] = value
    return props


def parse_overrides(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--override expects key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out
