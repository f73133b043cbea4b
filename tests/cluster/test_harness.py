"""The harness's network does what the fault tests rely on: nodes reach each other and the clients over the
bridge, a cut stops exactly the traffic it names until healed, an isolated node is unreachable even from the
clients, and what a crashed run left (namespaces, links, processes) is gone when its slot is taken again."""

from __future__ import annotations

import os
import socket
import subprocess as sp
import sys
import time
from typing import Iterator

import pytest
from harness import SLOTS, HarnessUnavailable, Network, Node, run

PORT = 7000
LISTEN = f"import socket, time\ns = socket.create_server(('', {PORT}))\nwhile True:\n    s.accept()[0].close()\n"


def take_network() -> Network:
    try:
        return Network.create()
    except HarnessUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture
def network() -> Iterator[Network]:
    net = take_network()
    try:
        yield net
    finally:
        net.close()


def listen(node: Node) -> sp.Popen:
    """A TCP server on the node's port :data:`PORT`, once it accepts connections."""
    server = sp.Popen(["ip", "netns", "exec", node.netns, sys.executable, "-c", LISTEN])
    deadline = time.monotonic() + 10
    while not connects_from(None, node):
        assert time.monotonic() < deadline and server.poll() is None, f"nothing listens on {node.address}:{PORT}"
        time.sleep(0.1)
    return server


def connects_from(origin: Node | None, target: Node) -> bool:
    """Whether a TCP connection from ``origin``'s namespace (None: the root namespace, the clients') to
    ``target`` is accepted within half a second."""
    if origin is None:
        try:
            socket.create_connection((target.address, PORT), timeout=0.5).close()
            return True
        except OSError:
            return False
    code = f"import socket; socket.create_connection(({target.address!r}, {PORT}), timeout=0.5).close()"
    return sp.run(["ip", "netns", "exec", origin.netns, sys.executable, "-c", code], capture_output=True).returncode == 0


def test_cuts_stop_only_the_traffic_they_name_until_healed(network: Network) -> None:
    a, b, c = network.add_node("a", 21), network.add_node("b", 22), network.add_node("c", 23)
    for node in (a, b, c):
        listen(node)
    assert connects_from(a, b) and connects_from(b, a) and connects_from(c, b)

    network.partition(a, b)
    assert not connects_from(a, b) and not connects_from(b, a)
    assert connects_from(c, b) and connects_from(a, c) and connects_from(None, a)

    network.isolate(c)
    assert not connects_from(None, c) and not connects_from(a, c)

    network.heal()
    assert connects_from(a, b) and connects_from(b, a) and connects_from(b, c) and connects_from(None, c)


def test_a_crashed_runs_leftovers_are_removed_when_its_slot_is_taken() -> None:
    crashed = take_network()
    node = crashed.add_node("x", 30)
    server = listen(node)
    crashed.lock.close()  # the run "crashes": its slot is free, everything it made is still there

    again = Network.create(slots=[crashed.slot])
    try:
        assert server.wait(10) == -9
        assert node.netns not in run("ip", "netns", "list").stdout
        links = run("ip", "-o", "link", "show").stdout
        assert node.host_veth not in links and f"{again.bridge}:" in links
    finally:
        again.close()
    assert again.bridge not in run("ip", "-o", "link", "show").stdout



def test_a_slot_claims_only_its_own_links() -> None:
    """Slot 1's prefix ``odk1`` begins slots 10-15's names too (``odk11br``, ``odk12b1``): taking slot 1 again
    must remove its own bridge and veths and none of theirs, which other runs may be using."""
    with open(os.devnull, "w") as lock:
        one = Network(1, lock)
        assert one.owns_link("odk1br") and one.owns_link("odk1b1") and one.owns_link("odk1zkp")
        for slot in range(10, SLOTS):
            other = Network(slot, lock)
            for name in (other.bridge, f"{other.prefix}b1", f"{other.prefix}zkp"):
                assert not one.owns_link(name), f"slot 1 claims slot {slot}'s {name}"
                assert other.owns_link(name)
