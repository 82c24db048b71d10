"""The fast tier (``pytest -m "not slow"``) leaves out exactly the tests that start processes."""

from __future__ import annotations

from tests.conftest import TESTS, imports_a_process_helper, starts_processes


def test_real_process_tests_are_marked_and_unit_tests_are_not() -> None:
    for name in (
        "integration/test_produce_errors.py",  # a process directory
        "client/test_client_roundtrip.py",  # imports broker_process / client_suite
        "cli/test_cli_basics.py",
        "console/test_console_cli.py",  # starts `josefk console` with Popen
    ):
        assert starts_processes(TESTS / name), name
    for name in (
        "client/test_client_units.py",
        "client/test_subscription_state.py",
        "storage/test_log_basics.py",
        "protocol/test_stubs.py",
    ):
        assert not starts_processes(TESTS / name), name


def test_a_module_importing_a_process_helper_is_marked() -> None:
    assert imports_a_process_helper("from broker_process import BrokerProcess\n")
    assert imports_a_process_helper("def f() -> None:\n    import tests.cluster.etcd_server\n")
    assert not imports_a_process_helper("import asyncio\nfrom client_helpers import x\n")
    assert imports_a_process_helper("import subprocess\np = subprocess.Popen(['josefk'])\n")
    assert not imports_a_process_helper("import subprocess\nsubprocess.run(['openssl'])\n")
