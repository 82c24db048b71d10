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
its keystore (``ssl.keystore.location``, PEM holding key and chain, ``ssl.key.password``),
each looked up listener-prefixed first, as the listener's own TLS settings are.

The user must exist before brokers can replicate: on a cluster ``josefk users add NAME
--etcd ENDPOINTS`` writes it into etcd before the first broker starts.

Imports josefk.client.security and josefk.config only.
"""

from __future__ import annotations

from josefk.client.security import PLAINTEXT, ClientSecurity
from josefk.config.broker import BROKER_CONFIG_KEYS, BrokerConfig


class InterBrokerSecurityError(ValueError):
    """The inter-broker settings cannot work; start-up stops with this message."""


def _listener_setting(config: BrokerConfig, listener: str, key: str) -> str | None:
    """``listener.name.<listener>.<key>``, else the broker-wide ``key``."""
    value = config.listener_property(f"listener.name.{listener}.{key}")
    if value is None and key in BROKER_CONFIG_KEYS:
        value = config.value_of(key)
    return value or None


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
        settings.update(
            ssl_ca_location=_listener_setting(config, listener, "ssl.truststore.location"),
            ssl_ca_pem=_listener_setting(config, listener, "ssl.truststore.certificates"),
            ssl_certificate_location=_listener_setting(config, listener, "ssl.keystore.location"),
            ssl_key_password=_listener_setting(config, listener, "ssl.key.password"),
            ssl_endpoint_identification_algorithm=_listener_setting(
                config, listener, "ssl.endpoint.identification.algorithm"
            )
            or "https",
        )
    try:
        return ClientSecurity.build(**{k: v for k, v in settings.items() if v is not None})
    except ValueError as exc:
        raise InterBrokerSecurityError(
            f"inter-broker security on listener {listener}: {exc}"
        ) from None
