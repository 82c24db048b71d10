"""How this broker secures the connections it opens to other brokers (replica fetches,
transaction markers, topic creation forwarded to the controller).

Owns ``inter_broker_security``: the ``ClientSecurity`` of the inter-broker listener, as Kafka
chooses it. The listener is ``inter.broker.listener.name``, else the one named after
``security.inter.broker.protocol``, else the first listener; its protocol is its
``listener.security.protocol.map`` entry. Over SASL the mechanism is
``sasl.mechanism.inter.broker.protocol`` (josefk's default SCRAM-SHA-512; Kafka's GSSAPI does
not exist here) and the broker's own user name and password come from the JAAS line Kafka
reads for that listener and mechanism (``listener.name.<listener>.<mechanism>.sasl.jaas.config``,
else ``sasl.jaas.config``), e.g. ``org.apache.kafka.common.security.scram.ScramLoginModule
required username="admin" password="admin-secret";``. Over TLS the broker trusts its
truststore (``ssl.truststore.location`` / ``ssl.truststore.certificates``, PEM) and presents
its keystore (``ssl.keystore.location``, PEM holding key and chain, ``ssl.key.password``)
where the other side asks for a client certificate: the inter-broker listener's effective
settings (``BrokerConfig.ssl_settings``, listener-prefixed first). An inline keystore
(``ssl.keystore.certificate.chain`` + ``ssl.keystore.key``) is not presented: Python's TLS
loads certificates from files only.

The user must exist before brokers can replicate: on a cluster ``josefk users add NAME
--etcd ENDPOINTS`` writes it into etcd before the first broker starts.

Imports josefk.client.security and josefk.config only.
"""

from __future__ import annotations

from josefk.client.security import PLAINTEXT, ClientSecurity
from josefk.config.broker import BrokerConfig


class InterBrokerSecurityError(ValueError):
    """The inter-broker settings cannot work; start-up stops with this message."""


def inter_broker_security(config: BrokerConfig) -> ClientSecurity:
    protocol = config.inter_broker_security_protocol()
    if protocol == "PLAINTEXT":
        return PLAINTEXT
    listener = config.inter_broker_listener()
    if listener is None:
        listeners = config.client_listeners()
        listener = listeners[0].name if listeners else "PLAINTEXT"
    settings: dict[str, str | None] = {"security_protocol": protocol}
    if protocol.startswith("SASL_"):
        mechanism = config.sasl_mechanism_inter_broker_protocol
        prefixed = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
        jaas = config.sasl_jaas_config_for(listener, mechanism)
        if jaas is None:
            raise InterBrokerSecurityError(
                f"brokers talk {protocol} with {mechanism} on listener {listener}, but this "
                f"broker has no credentials for it: set {prefixed} (or sasl.jaas.config) to "
                '<LoginModule> required username="..." password="...";'
            )
        settings.update(sasl_mechanism=mechanism, sasl_jaas_config=jaas)
    if protocol.endswith("SSL"):
        # The listener's effective ssl.* settings (listener.name.<name>.ssl.* over ssl.*).
        tls = config.ssl_settings(listener)
        # Kafka disables host name checking with an empty value; ClientSecurity reads "" so.
        identification = tls.get("ssl.endpoint.identification.algorithm")
        settings.update(
            ssl_ca_location=tls.get("ssl.truststore.location"),
            ssl_ca_pem=tls.get("ssl.truststore.certificates"),
            ssl_certificate_location=tls.get("ssl.keystore.location"),
            ssl_key_password=tls.get("ssl.key.password"),
            ssl_endpoint_identification_algorithm="https"
            if identification is None
            else identification,
        )
    try:
        return ClientSecurity.build(**{k: v for k, v in settings.items() if v is not None})
    except ValueError as exc:
        raise InterBrokerSecurityError(
            f"inter-broker security on listener {listener}: {exc}"
        ) from None
