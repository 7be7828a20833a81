"""The web console in a real browser (headless Chromium from the distribution, driven over the
DevTools protocol: compat_tests/cdp.py) against a kafkad subprocess with the console on, while
confluent-kafka runs a transactional workload. Checked on the rendered pages:

* an open transaction appears, Ongoing, with its partitions;
* the partition page shows the LSO held at the transaction's first offset, by that producer;
* a commit moves the LSO (the open page updates itself through the event stream);
* an abort marks the aborted records in the raw view, and the read_committed view omits them;
* a transaction left open past ``kafkad.http.hanging.transaction.ms`` is flagged HANGING;
* a consumer-protocol (KIP-848) group shows its members' epochs, states and assignments, and
  its open page follows a second member joining until both are reconciled;
* ``kafkad proxy --http`` in front of the broker serves the console's transactions page for
  the traffic through it, labelled "observed through the proxy": open, then committed/aborted.

Screenshots are saved under the test's tmp dir (the path is printed); any browser console
error fails the test.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests._support import EXTERNAL, topic_name, wait_for
from compat_tests.cdp import Browser, find_chromium
from compat_tests.conftest import BrokerProcess, _spawn

HANGING_MS = 3_000
CONSOLE_LINE = re.compile(r"web console on (http://127\.0\.0\.1:\d+)")
pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def console_broker(tmp_path: Path) -> Iterator[tuple[BrokerProcess, str]]:
    if EXTERNAL:
        pytest.skip("needs kafkad's own console: not against KAFKAD_BOOTSTRAP")
    b = _spawn(
        tmp_path,
        "console",
        {
            "kafkad.http.listeners": "http://:0",
            "kafkad.http.hanging.transaction.ms": str(HANGING_MS),
        },
    )
    try:
        url = wait_for(
            lambda: (m := CONSOLE_LINE.search(b.log_tail())) and m.group(1), 10, "console"
        )
        yield b, url
    finally:
        assert b.stop() in (None, 0), b.log_tail()


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    binary = find_chromium()
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed (scripts/install-client-tools installs it)")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    profile = tmp_path / "chromium-profile"
    profile.mkdir()
    b = Browser(binary, profile)
    try:
        yield b
    finally:
        b.close()


def producer(bootstrap: str, tid: str) -> Producer:
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": tid,
            "transaction.timeout.ms": 600_000,  # the coordinator must not abort it first
            "linger.ms": 0,
        }
    )
    p.init_transactions(30)
    p.begin_transaction()
    return p


def send(p: Producer, topic: str, *values: bytes) -> None:
    for v in values:
        p.produce(topic, value=v, partition=0)
    assert p.flush(30) == 0


def test_transactions_in_the_browser(
    console_broker: tuple[BrokerProcess, str], browser: Browser, tmp_path: Path
) -> None:
    kafka, url = console_broker
    shots = tmp_path / "screenshots"
    shots.mkdir()
    print(f"console screenshots: {shots}")
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.create_topics([NewTopic("orders", 1, 1)])["orders"].result(30)

    def page_text(path: str, selector: str) -> str:
        browser.goto(url + path)
        return browser.text(selector) or ""

    # an open transaction, with its partition
    opened = producer(kafka.bootstrap, "checkout")
    send(opened, "orders", b"first", b"second", b"third")
    row = '[data-txn="checkout"]'
    assert "Ongoing" in page_text("/transactions", row)
    assert "orders-0" in (browser.text(f"{row} .partitions") or "")
    browser.screenshot(shots / "1-open-transaction.png")

    # the partition page: LSO held at the transaction's first offset (0), by that producer
    browser.goto(url + "/topics/orders/0")
    assert (browser.text("#lso"), browser.text("#hw")) == ("0", "3")
    assert "checkout" in (browser.text("#lso-holder") or "")
    assert "open since offset 0" in (browser.text("#lso-holder") or "")
    browser.screenshot(shots / "2-lso-held.png")

    # a commit moves the LSO: the page, left open, updates itself (event stream)
    opened.commit_transaction(30)
    wait_for(lambda: browser.text("#lso") == "4", 20, "the LSO to move on the open page")
    assert browser.text("#hw") == "4" and "nothing" in (browser.text("#lso-holder") or "")
    browser.screenshot(shots / "3-committed.png")

    # an abort marks the records; the read_committed view leaves them out
    aborted = producer(kafka.bootstrap, "refund")
    send(aborted, "orders", b"refund-1", b"refund-2")
    aborted.abort_transaction(30)
    browser.goto(url + "/topics/orders/0/records?offset=0")
    marked = browser.js(
        "[...document.querySelectorAll('#batches tr.aborted')].map(r => r.dataset.baseOffset)"
    )
    assert marked == ["4"], marked  # 3: COMMIT; 4-5: the aborted batch; 6: ABORT
    assert "refund-1" in (browser.text('#batches tr[data-base-offset="4"]') or "")
    markers = browser.js("[...document.querySelectorAll('#batches .badge')].map(b => b.innerText)")
    assert markers == ["COMMIT", "ABORTED", "ABORT"], markers
    browser.screenshot(shots / "4-aborted-records.png")
    browser.goto(url + "/topics/orders/0/records?offset=0&isolation=read_committed")
    shown = browser.js(
        "[...document.querySelectorAll('#batches tr[data-base-offset]')]"
        ".map(r => r.dataset.baseOffset)"
    )
    assert shown == ["0"], shown  # the committed batch only: no markers, no aborted data

    # a transaction left open past the hanging threshold is flagged
    hanging = producer(kafka.bootstrap, "stuck")
    send(hanging, "orders", b"never-ends")

    def flagged() -> bool:
        return "HANGING" in page_text("/transactions", '[data-txn="stuck"]')

    wait_for(flagged, 30, "the open transaction to be flagged hanging")
    assert "pinning its LSO" in (browser.text('[data-txn="stuck"]') or "")
    assert "HANGING" in (browser.text("#open-transactions") or "")
    browser.screenshot(shots / "5-hanging.png")

    assert browser.errors == [], browser.errors
    hanging.abort_transaction(30)


def test_a_consumer_protocol_group_in_the_browser(
    console_broker: tuple[BrokerProcess, str], browser: Browser, tmp_path: Path
) -> None:
    """A KIP-848 group (confluent-kafka group.protocol=consumer): the groups page lists it as a
    consumer group; its page shows each member's epoch, state, assignment and target, and
    follows a second member joining (event stream) until both are reconciled."""
    from confluent_kafka import Consumer

    kafka, url = console_broker
    shots = tmp_path / "screenshots"
    shots.mkdir()
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.create_topics([NewTopic("events", 2, 1)])["events"].result(30)

    def consumer(client_id: str) -> Consumer:
        c = Consumer(
            {
                "bootstrap.servers": kafka.bootstrap,
                "group.id": "kip848",
                "group.protocol": "consumer",
                "client.id": client_id,
                "auto.offset.reset": "earliest",
            }
        )
        c.subscribe(["events"])
        return c

    def settled(consumers: list[Consumer], n: int) -> bool | None:
        for c in consumers:
            c.poll(0.1)
        return (
            sum(len(c.assignment()) for c in consumers) == 2
            and all(c.assignment() for c in consumers[:n])
        ) or None

    first = consumer("first")
    second = None
    try:
        wait_for(lambda: settled([first], 1), 30, "the first member's assignment", step=0)
        browser.goto(url + "/groups")
        row = browser.text('[data-group="kip848"]') or ""
        assert "consumer" in row and "Stable" in row, row
        browser.goto(url + "/groups/kip848")
        assert browser.text("tr[data-member] .assignment") == "events-0, events-1"
        browser.screenshot(shots / "1-one-member.png")

        second = consumer("second")
        consumers = [first, second]
        wait_for(lambda: settled(consumers, 2), 30, "the split between two members", step=0)

        def shown() -> bool | None:  # the open page follows (event stream), no navigation
            for c in consumers:
                c.poll(0.1)
            rows = browser.js(
                "[...document.querySelectorAll('tr[data-member]')].map(r => [r.querySelector("
                "'.client').innerText, r.querySelector('.epoch').innerText, r.querySelector("
                "'.state').innerText, r.querySelector('.assignment').innerText, "
                "r.querySelector('.target').innerText])"
            )
            epoch = browser.text("#group-epoch")
            done = (
                browser.text("#state") == "Stable"
                and len(rows) == 2
                and all(r[1] == epoch and r[2] == "stable" and r[3] == r[4] for r in rows)
            )
            return done or None

        wait_for(shown, 30, "both members shown reconciled on the open page", step=0.2)
        assignments = sorted(
            browser.js(
                "[...document.querySelectorAll('tr[data-member] .assignment')]"
                ".map(c => c.innerText)"
            )
        )
        assert assignments == ["events-0", "events-1"], assignments
        browser.screenshot(shots / "2-two-members.png")
        assert browser.errors == [], browser.errors
    finally:
        first.close()
        if second is not None:
            second.close()


def test_transactions_observed_through_the_proxy_in_the_browser(
    broker: object, bootstrap: str, browser: Browser, tmp_path: Path
) -> None:
    """``kafkad proxy --http`` serves the console's transactions page for what passed
    through it: an open transaction, then its commit and an abort, labelled as observed."""
    from compat_tests.test_proxy import ProxyProcess

    proxy = ProxyProcess(bootstrap, tmp_path, "", "--http", "127.0.0.1:0")
    shots = tmp_path / "screenshots"
    shots.mkdir()
    print(f"proxy console screenshots: {shots}")
    try:
        url = proxy.http.rstrip("/")
        admin = AdminClient({"bootstrap.servers": proxy.bootstrap})
        topic = topic_name("observed-orders")
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)

        def row_text() -> str:
            browser.goto(url + "/transactions")
            return browser.text('[data-txn="observed-checkout"]') or ""

        p = producer(proxy.bootstrap, "observed-checkout")
        send(p, topic, b"first")
        assert "ongoing" in row_text()
        assert f"{topic}-0" in (browser.text("[data-txn] .partitions") or "")
        banner = browser.text("#observed") or ""
        assert banner.startswith("Observed through the proxy, not broker state"), banner
        assert "observed through the proxy" in (browser.text("h1") or "")
        assert browser.js("document.title") == "Observed transactions · kafkad"
        browser.screenshot(shots / "1-observed-open.png")

        p.commit_transaction(30)
        p.begin_transaction()
        send(p, topic, b"refund")
        p.abort_transaction(30)
        text = row_text()
        assert "aborted" in text, text
        counts = browser.js(
            "[...document.querySelectorAll('[data-txn=\"observed-checkout\"] td.n')]"
            ".map(c => c.innerText)"
        )
        assert counts[2:4] == ["1", "1"], counts  # one commit, one abort
        assert "1 committed" in (browser.text("#totals") or "")
        browser.screenshot(shots / "2-observed-ended.png")
        assert browser.errors == [], browser.errors
    finally:
        assert proxy.stop() == 0, proxy.log_path.read_text()[-5000:]
