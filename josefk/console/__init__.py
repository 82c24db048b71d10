"""The web console of ``josefk console``: look at a Kafka-compatible cluster in a browser.

An aiohttp application that speaks to the cluster only through josefk.client (the Kafka
protocol, with the console's own credentials) and, where given, the brokers' Prometheus
endpoints. ``app`` builds and serves it; ``pages`` renders the HTML frames; ``api`` answers
the JSON under ``/api/``; ``sampler`` takes a snapshot of the cluster every few seconds and
feeds ``history``, the few minutes of series the charts draw; ``metrics`` reads the brokers'
Prometheus endpoints; ``static/`` holds the project's own script and stylesheet (no build
step, nothing from a CDN).

Imports josefk.client (and through it josefk.protocol and josefk.records); never
josefk.broker, josefk.storage or josefk.cli.
"""
