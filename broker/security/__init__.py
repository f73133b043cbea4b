"""Transport security and authentication of client connections: TLS (``tls.py``, with the certificate's
principal in ``ssl_principal.py``) and SASL (``sasl.py`` and its mechanisms), configured per listener."""
