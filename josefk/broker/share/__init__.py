"""Share groups' partitions (KIP-932): the in-flight records of each share partition on its
leader, share sessions, and the fetch and acknowledgement paths the handlers call.

Membership of share groups belongs to the group coordinator (``josefk.broker.group.share``);
this package owns what the partition leader keeps.
"""
