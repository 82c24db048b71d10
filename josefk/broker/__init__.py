"""The broker daemon: listeners, connections, request dispatch and the API handlers.

Joins josefk.protocol and josefk.storage. Nothing below it imports it.
"""
