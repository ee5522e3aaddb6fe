#!/usr/bin/env python3
"""The benchmark workload: PostHog-like analytics events, reproducible to the byte.

Every figure Millpond reports (scripts/bench-e2e.sh, bench-sizing.sh,
bench-convert-instructions.sh, the convert criterion bench) is measured on
these events, so their shape is what the figures mean:

  * ~1.3 KB per event. `properties` and `person_properties` are JSON objects
    *serialized into strings* (as PostHog's pipeline carries them), so most
    bytes are escaped JSON text inside a JSON string.
  * Skew: the event name is Zipf-distributed over 50 names (`$pageview` is
    about a quarter of all events), the team id over 200 teams, the
    distinct id over a pool of 40,000 users weighted towards a few.
  * A long tail of keys: `properties` holds 18 standard keys (most of them
    `$`-prefixed) plus 0-4 custom keys drawn (Zipf) from 5,000, so a run
    sees thousands of distinct property keys, most of them rarely.
  * A varying top level: 11 keys every event has (`person_id` is null in
    ~3 % of them), optional keys with their own frequencies (from 70 % down
    to 0.2 %), a nested object (`$set`, `$set_once`) that a converter has to
    write back as JSON text, five very rare columns (0.05 % of events) and
    one new column, `late_column_K`, on every 25,000th event: a table that
    has to grow while data flows. Each key keeps one JSON type throughout.
  * Poison, `--poison-rate` of the messages, split evenly between six kinds:
    `bigint` (a valid event with a top-level `big_id` in (2^63, 2^64): a
    JSON object a pipeline must still write), `invalid_json` (truncated,
    unquoted key, trailing comma), `json_array`, `json_scalar`, `tombstone`
    (a null Kafka value) and `empty` (a zero-length value).

Deterministic: the same --count, --seed and --poison-rate give the same
messages in the same order, byte for byte, on any Python 3.9+ (only the
standard library: random.Random with an int seed and json). The first N
messages of a longer run are the N messages of a shorter one.

Output, one or both:
  --out FILE                one value per line (tombstones and empty values
                            are both empty lines; no value holds a newline)
  --produce HOST:PORT --topic T [--partitions N]
                            produce with confluent-kafka, keyed by
                            distinct_id; the topic is created with N
                            partitions when missing
A JSON summary goes to stdout, and with --stats-out FILE also to FILE with
the list of top-level keys: count, seed, poison_rate, kinds (messages of each
kind), json_objects (valid + bigint: the rows a pipeline must land),
value_bytes, avg_value_bytes (per non-tombstone message), team_id_sum,
top_level_keys (first-seen order), and when producing topic, delivered and
delivery_errors. Exit status 1 when a message was not delivered.
"""
from __future__ import annotations

import argparse
import bisect
import json
import random
import sys
import time
import uuid

KINDS = ("valid", "bigint", "invalid_json", "json_array", "json_scalar", "tombstone", "empty")
POISON = KINDS[1:]

# Most frequent first: rank 1 of the Zipf draw is $pageview.
EVENTS = (
    "$pageview", "$autocapture", "$pageleave", "$identify", "$feature_flag_called",
    "$web_vitals", "$screen", "$set", "$groupidentify", "$exception",
    "$rageclick", "$dead_click", "$survey_shown", "$survey_sent", "$survey_dismissed",
    "$opt_in", "$create_alias", "$ai_generation", "$ai_trace", "$ai_span",
    "user_signed_up", "user_logged_in", "user_logged_out", "cta_clicked", "form_submitted",
    "order_completed", "checkout_started", "cart_item_added", "cart_item_removed", "plan_upgraded",
    "plan_downgraded", "member_invited", "invite_accepted", "report_exported", "file_uploaded",
    "search_run", "filter_changed", "dashboard_opened", "chart_created", "chart_viewed",
    "replay_watched", "experiment_started", "flag_toggled", "api_token_created", "email_opened",
    "onboarding_step", "video_started", "comment_added", "settings_saved", "webhook_failed",
)
AUTOCAPTURE_LIKE = {"$autocapture", "$rageclick"}
BROWSERS = (("Chrome", "131.0.0.0"), ("Safari", "18.1"), ("Firefox", "133.0"), ("Microsoft Edge", "131.0.0.0"),
            ("Samsung Internet", "26.0"), ("Chrome iOS", "131.0.6778.73"), ("Opera", "115.0.0.0"))
SYSTEMS = (("Mac OS X", "15.1.0"), ("Windows", "10.0"), ("iOS", "18.1.1"), ("Android", "15"),
           ("Linux", "6.6"), ("Chrome OS", "16033.58.0"))
DEVICES = ("Desktop", "Mobile", "Tablet")
SCREENS = ((1920, 1080), (1512, 982), (390, 844), (2560, 1440), (1366, 768), (412, 915))
HOSTS = ("app.acme.test", "www.acme.test", "docs.acme.test", "store.widgets.test", "eu.widgets.test",
         "blog.gadget.test", "status.acme.test", "localhost:3000")
PATHS = ("/", "/pricing", "/docs/quickstart", "/docs/api/capture", "/blog/shipping-faster-with-flags",
         "/product/replay", "/signup", "/login", "/account/billing", "/project/7/dashboard/31",
         "/project/7/insights/Xy12abCd", "/cart", "/search", "/about", "/jobs", "/project/7/replay/list")
REFERRERS = ("$direct", "https://www.google.com/", "https://news.ycombinator.com/", "https://github.com/",
             "https://x.com/", "https://www.bing.com/", "https://duckduckgo.com/", "https://www.reddit.com/")
LIBRARIES = (("web", "1.186.3"), ("posthog-python", "3.7.4"), ("posthog-node", "4.3.1"),
             ("posthog-ios", "3.15.2"), ("posthog-android", "3.9.3"), ("posthog-go", "1.2.24"))
PLANS = ("free", "pay_as_you_go", "startup", "teams", "enterprise")
COUNTRIES = ("US", "GB", "DE", "FR", "BR", "IN", "JP", "CA", "AU", "NL", "ES", "PL", "SE", "MX")
CITIES = ("Austin", "London", "Berlin", "Paris", "São Paulo", "Bengaluru", "Tokyo", "Toronto", "Sydney")
WORDS = ("control", "test", "variant_a", "variant_b", "red", "green", "blue", "monthly", "yearly",
         "trial", "beta", "legacy", "new_ui", "compact")
TAGS = ("a", "button", "div", "span", "li", "nav", "form", "input", "section", "svg")
CLASSES = ("btn", "btn-primary", "nav-item", "card", "LemonButton", "menu-link", "hero-cta",
           "footer-link", "row", "col-6", "Toastify__close")
TAIL_STEMS = ("plan_tier", "utm_source", "utm_medium", "utm_campaign", "experiment", "flag",
              "team_size", "cart_total", "sku", "section", "bucket", "locale", "build", "tenant",
              "region", "promo_code", "widget", "layout", "ab_group", "source_page")
RARE_COLUMNS = ("legacy_source", "import_batch", "migrated_from", "debug_note", "replay_of")
TOKEN_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz0123456789"

START_US = 1_772_323_200 * 1_000_000  # 2026-03-01 00:00:00 UTC
NEW_COLUMN_EVERY = 25_000


class Zipf:
    """Draws ranks 0..n-1 with probability proportional to 1 / (rank + 1) ** s."""

    def __init__(self, n: int, s: float):
        total, self.cumulative = 0.0, []
        for rank in range(1, n + 1):
            total += rank ** -s
            self.cumulative.append(total)
        self.total = total

    def draw(self, rng: random.Random) -> int:
        return bisect.bisect_right(self.cumulative, rng.random() * self.total)


def stamp(us: int) -> str:
    """Microseconds since the epoch as 'YYYY-MM-DD HH:MM:SS.ffffff' (UTC)."""
    seconds, micros = divmod(us, 1_000_000)
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds)) + f".{micros:06d}"


def compact(value) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class Workload:
    def __init__(self, seed: int, poison_rate: float):
        self.rng = random.Random(seed)
        self.poison_rate = poison_rate
        # Fixed pools come from their own stream, so the event stream alone
        # decides what a message looks like.
        pools = random.Random(seed * 7919 + 1)
        self.event_rank = Zipf(len(EVENTS), 1.1)
        self.teams = pools.sample(range(1, 90_000), 200)
        self.team_rank = Zipf(len(self.teams), 1.2)
        self.tokens = {t: "phc_" + "".join(pools.choice(TOKEN_ALPHABET) for _ in range(24)) for t in self.teams}
        self.tail_keys = [TAIL_STEMS[i] if i < len(TAIL_STEMS) else f"{pools.choice(TAIL_STEMS)}_{i}"
                          for i in range(5000)]
        self.tail_rank = Zipf(len(self.tail_keys), 1.05)
        self.users = [f"user{i}@mail{i % 89}.test" if i % 4 == 0 else str(uuid.UUID(int=pools.getrandbits(128)))
                      for i in range(40_000)]
        self.clock_us = START_US
        self.events = 0

    # -- pieces of an event ------------------------------------------------
    def uuid7(self, ms: int) -> str:
        bits = (ms << 80) | self.rng.getrandbits(80)
        bits = (bits & ~(0xF << 76)) | (0x7 << 76)  # version 7
        bits = (bits & ~(0x3 << 62)) | (0x2 << 62)  # RFC 4122 variant
        return str(uuid.UUID(int=bits))

    def uuid4(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def tail_value(self, key: int):
        r = self.rng
        kind = key % 5  # a key keeps its type wherever it appears
        if kind == 0:
            return r.choice(WORDS)
        if kind == 1:
            return r.randrange(250_000)
        if kind == 2:
            return round(r.random() * 500, 2)
        if kind == 3:
            return r.random() < 0.4
        return f"{r.choice(WORDS)}:{r.getrandbits(40):010x}"

    def elements_chain(self) -> str:
        r = self.rng
        links = []
        for depth in range(1 + r.randrange(4)):
            tag, cls = r.choice(TAGS), r.choice(CLASSES)
            link = f'{tag}.{cls}:attr__class="{cls}"nth-child="{1 + r.randrange(8)}"nth-of-type="{1 + r.randrange(4)}"'
            if depth == 0:
                path = r.choice(PATHS)
                link += f'attr__href="{path}"href="{path}"text="{r.choice(WORDS).replace("_", " ").title()}"'
            links.append(link)
        return ";".join(links)

    def event(self) -> tuple[str, dict]:
        r = self.rng
        self.clock_us += r.randrange(2001)  # ~1,000 events per second of event time
        at = self.clock_us
        received = at + 40_000 + r.randrange(6_000_000)
        name = EVENTS[self.event_rank.draw(r)]
        team = self.teams[self.team_rank.draw(r)]
        user = self.users[int(len(self.users) * r.random() ** 3)]
        browser, browser_version = r.choice(BROWSERS)
        system, system_version = r.choice(SYSTEMS)
        library, library_version = r.choice(LIBRARIES)
        width, height = r.choice(SCREENS)
        host, path = r.choice(HOSTS), r.choice(PATHS)
        session = self.uuid7(at // 1000 - r.randrange(3_600_000))
        window = self.uuid7(at // 1000 - r.randrange(600_000))
        properties = {
            "$os": system, "$os_version": system_version,
            "$browser": browser, "$browser_version": browser_version,
            "$device_type": r.choice(DEVICES),
            "$current_url": f"https://{host}{path}", "$pathname": path,
            "$referrer": r.choice(REFERRERS), "$referring_domain": r.choice(HOSTS),
            "$screen_width": width, "$screen_height": height,
            "$lib": library, "$lib_version": library_version,
            "$insert_id": f"{r.getrandbits(60):015x}", "$time": round(at / 1e6, 3),
            "$session_id": session, "$geoip_country_code": r.choice(COUNTRIES),
            "token": self.tokens[team],
        }
        if r.random() < 0.1:
            properties["$geoip_city_name"] = r.choice(CITIES)
        for _ in range(r.randrange(5)):
            key = self.tail_rank.draw(r)
            properties[self.tail_keys[key]] = self.tail_value(key)
        person = {
            "email": user if "@" in user else None,
            "plan": r.choice(PLANS),
            "$initial_os": system,
            "$initial_browser": browser,
        }
        event = {
            "uuid": self.uuid7(at // 1000) if r.random() < 0.85 else self.uuid4(),
            "event": name,
            "team_id": team,
            "distinct_id": user,
            "timestamp": stamp(at),
            "created_at": stamp(received),
            "properties": compact(properties),
            "person_id": self.uuid4() if r.random() >= 0.03 else None,
            "person_properties": compact(person),
            "person_created_at": stamp(at - r.randrange(500 * 86_400) * 1_000_000),
            "elements_chain": self.elements_chain() if name in AUTOCAPTURE_LIKE else "",
        }
        # Optional top-level keys, each with its own frequency.
        if r.random() < 0.65:
            event["$session_id"] = session
        if r.random() < 0.25:
            event["$window_id"] = window
        if r.random() < 0.7:
            event["sent_at"] = stamp(received - r.randrange(30_000))
        if r.random() < 0.5:
            event["ip"] = f"{1 + r.randrange(223)}.{r.randrange(256)}.{r.randrange(256)}.{1 + r.randrange(254)}"
        if r.random() < 0.3:
            event["$group_0"] = f"org:{r.randrange(6000)}"
        if r.random() < 0.08:
            event["$group_1"] = f"project:{r.randrange(25_000)}"
        if r.random() < 0.35:
            event["capture_lib"] = f"{library}@{library_version}"
        if r.random() < 0.05:  # nested: a converter writes it back as JSON text
            event["$set"] = {"plan": r.choice(PLANS), "seats": 1 + r.randrange(400),
                             "labels": [r.choice(WORDS) for _ in range(r.randrange(4))]}
        if r.random() < 0.02:
            event["$set_once"] = {"first_seen_path": r.choice(PATHS), "first_country": r.choice(COUNTRIES)}
        if r.random() < 0.01:
            event["historical_migration"] = True
        if r.random() < 0.002:
            event["retry_count"] = 1 + r.randrange(6)
        if r.random() < 0.0005:
            event[r.choice(RARE_COLUMNS)] = r.choice(WORDS)
        self.events += 1
        if self.events % NEW_COLUMN_EVERY == 0:
            event[f"late_column_{self.events // NEW_COLUMN_EVERY}"] = r.randrange(10_000)
        return user, event

    # -- one message ---------------------------------------------------------
    def message(self) -> tuple[str, bytes, bytes | None, dict | None]:
        """(kind, key, value, the JSON object when the value is one)."""
        r = self.rng
        user, event = self.event()
        key = user.encode()
        kind = "valid"
        if self.poison_rate > 0 and r.random() < self.poison_rate:
            kind = POISON[r.randrange(len(POISON))]
        if kind == "valid":
            return kind, key, compact(event).encode(), event
        if kind == "bigint":
            event["big_id"] = 2**63 + 1 + r.randrange(2**63 - 1)
            return kind, key, compact(event).encode(), event
        if kind == "invalid_json":
            return kind, key, self.broken(compact(event)), None
        if kind == "json_array":
            return kind, key, compact([event["uuid"], event["team_id"], {"event": event["event"]}]).encode(), None
        if kind == "json_scalar":
            return kind, key, r.choice((b"42", b"-0.5", b'"a bare string"', b"false", b"null")), None
        if kind == "tombstone":
            return kind, key, None, None
        return kind, key, b"", None

    def broken(self, text: str) -> bytes:
        r = self.rng
        how = r.randrange(3)
        if how == 0:  # cut short: no proper prefix of an object parses
            bad = text[: 1 + r.randrange(len(text) - 1)]
        elif how == 1:  # a key without quotes
            bad = "{event:" + text[1:]
        else:  # a comma before the closing brace
            bad = text[:-1] + ",}"
        try:
            json.loads(bad)
        except ValueError:
            return bad.encode()
        raise AssertionError(f"an invalid_json message parses: {bad[:80]!r}")


def ensure_topic(bootstrap: str, topic: str, partitions: int) -> int:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = admin.list_topics(timeout=30).topics
    if topic not in listed or listed[topic].error is not None:
        for created in admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)]).values():
            created.result(30)
        listed = admin.list_topics(topic=topic, timeout=30).topics
    return len(listed[topic].partitions)


class KafkaOut:
    def __init__(self, bootstrap: str, topic: str, partitions: int):
        from confluent_kafka import Producer

        found = ensure_topic(bootstrap, topic, partitions)
        if found != partitions:
            print(f"gen_events: topic {topic} has {found} partitions, not {partitions}", file=sys.stderr)
        self.topic, self.delivered, self.errors, self.first_error = topic, 0, 0, None
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": False,
            "compression.type": "none", "linger.ms": 50, "batch.size": 4 << 20,
            "batch.num.messages": 10_000, "queue.buffering.max.messages": 500_000,
            "queue.buffering.max.kbytes": 1 << 20,
        })

    def on_delivery(self, err, _message) -> None:
        if err is None:
            self.delivered += 1
            return
        self.errors += 1
        self.first_error = self.first_error or str(err)

    def send(self, key: bytes, value: bytes | None) -> None:
        while True:
            try:
                self.producer.produce(self.topic, value=value, key=key, on_delivery=self.on_delivery)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                self.producer.poll(0.05)
        self.producer.poll(0)

    def close(self) -> None:
        left = self.producer.flush(120)
        if left:
            self.errors += left
            self.first_error = self.first_error or f"{left} messages not delivered within 120 s"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=10_000, help="messages, poison included")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--poison-rate", type=float, default=0.0, help="share of poison messages, 0..1")
    ap.add_argument("--out", help="write the values to this file, one per line")
    ap.add_argument("--produce", metavar="BOOTSTRAP", help="produce to the Kafka broker at this address")
    ap.add_argument("--topic", default="events")
    ap.add_argument("--partitions", type=int, default=4, help="partitions of the topic when it is created")
    ap.add_argument("--stats-out", help="write the summary, with the top-level keys, to this file")
    args = ap.parse_args()
    if args.count < 0:
        ap.error("--count must be 0 or more")
    if not 0.0 <= args.poison_rate <= 1.0:
        ap.error("--poison-rate must be between 0 and 1")
    if not args.out and not args.produce:
        ap.error("give --out FILE, --produce BOOTSTRAP, or both")

    workload = Workload(args.seed, args.poison_rate)
    kafka = KafkaOut(args.produce, args.topic, args.partitions) if args.produce else None
    out = open(args.out, "wb") if args.out else None
    kinds = dict.fromkeys(KINDS, 0)
    keys: dict[str, None] = {}
    value_bytes = team_id_sum = 0
    started = time.perf_counter()
    for _ in range(args.count):
        kind, key, value, event = workload.message()
        kinds[kind] += 1
        value_bytes += len(value or b"")
        if event is not None:
            keys.update(dict.fromkeys(event))
            team_id_sum += event["team_id"]
        if out is not None:
            out.write((value or b"") + b"\n")
        if kafka is not None:
            kafka.send(key, value)
    if kafka is not None:
        kafka.close()
    if out is not None:
        out.close()
    summary = {
        "count": args.count, "seed": args.seed, "poison_rate": args.poison_rate, "kinds": kinds,
        "json_objects": kinds["valid"] + kinds["bigint"], "value_bytes": value_bytes,
        "avg_value_bytes": round(value_bytes / max(1, args.count - kinds["tombstone"]), 1),
        "seconds": round(time.perf_counter() - started, 2), "team_id_sum": team_id_sum,
    }
    if kafka is not None:
        summary.update(topic=kafka.topic, delivered=kafka.delivered, delivery_errors=kafka.errors)
        if kafka.first_error:
            summary["first_delivery_error"] = kafka.first_error
    print(json.dumps(summary))
    if args.stats_out:
        with open(args.stats_out, "w") as f:
            f.write(json.dumps({**summary, "top_level_keys": list(keys)}) + "\n")
    return 1 if kafka is not None and kafka.errors else 0


if __name__ == "__main__":
    sys.exit(main())
