"""Probes that own the prometheus-client metric objects, and the HTTP exporter.

Callers use meaningful methods (``bytes_in``, ``request_latency``); nothing else in josefk
touches prometheus_client. Must not import josefk.storage or josefk.broker.
"""
