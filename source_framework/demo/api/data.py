"""Demo data computed from each id with a cheap hash, identical in every process with the same knobs; only touches are stored."""

from __future__ import annotations

import random
import threading
import time
from datetime import UTC, datetime
from typing import Any

from source_framework.demo.api.index import Lane

T0 = 1_735_689_600  # 2025-01-01T00:00:00Z as epoch seconds
SPAN_SECONDS = 365 * 86_400
TOUCHABLE_STREAMS = ("users", "orders", "products")

_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_NINETY_DAYS = 90 * 86_400
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Fixed per-stream salts (never hash(): string hashing is randomised per process).
_SALTS = {"users": 0x5553455253, "orders": 0x4F52444552, "products": 0x50524F44, "stores": 0x53544F5245}

_FIRST_NAMES = (
    "Ada", "Alan", "Grace", "Linus", "Barbara", "Ken", "Margaret", "Dennis", "Frances", "Edsger",
    "Radia", "Donald", "Sophie", "Tim", "Katherine", "John", "Hedy", "Niklaus", "Shafi", "Leslie",
    "Joan", "Guido", "Lynn", "Bjarne", "Anita", "Yukihiro", "Karen", "James", "Mary", "Vint",
)
_LAST_NAMES = (
    "Lovelace", "Turing", "Hopper", "Torvalds", "Liskov", "Thompson", "Hamilton", "Ritchie", "Allen",
    "Dijkstra", "Perlman", "Knuth", "Wilson", "Berners", "Johnson", "McCarthy", "Lamarr", "Wirth",
    "Goldwasser", "Lamport", "Clarke", "Rossum", "Conway", "Stroustrup", "Borg", "Matsumoto", "Jones",
    "Gosling", "Keller", "Cerf",
)
_CITIES = (
    ("Lisbon", "PT"), ("Porto", "PT"), ("Madrid", "ES"), ("Valencia", "ES"), ("Lyon", "FR"),
    ("Paris", "FR"), ("Berlin", "DE"), ("Hamburg", "DE"), ("Vienna", "AT"), ("Zurich", "CH"),
    ("Milan", "IT"), ("Turin", "IT"), ("Oslo", "NO"), ("Dublin", "IE"), ("Leeds", "GB"),
    ("Austin", "US"), ("Denver", "US"), ("Toronto", "CA"), ("Osaka", "JP"), ("Sydney", "AU"),
)
_STREETS = ("Oak", "Maple", "Cedar", "Pine", "Elm", "Birch", "Willow", "Harbor", "Mill", "Station", "Market", "River")
_STREET_KINDS = ("Street", "Avenue", "Road", "Lane", "Way", "Square")
_DOMAINS = ("example.com", "example.org", "example.net", "mail.test", "corp.test")
_COMPANY_KINDS = ("Labs", "Systems", "Group", "Works", "Partners", "Analytics", "Logistics", "Studio")
_INDUSTRIES = ("software", "retail", "finance", "health", "logistics", "media", "energy", "education")
_JOBS = (
    "engineer", "analyst", "designer", "manager", "accountant", "recruiter", "architect", "consultant",
    "researcher", "support agent", "data scientist", "product owner", "sales lead", "writer",
)
_ORDER_STATUSES = ("pending", "paid", "shipped", "cancelled")
_CURRENCIES = ("USD", "EUR", "GBP")
_ADJECTIVES = ("Compact", "Deluxe", "Rugged", "Smart", "Classic", "Eco", "Ultra", "Mini", "Pro", "Quiet")
_NOUNS = ("Kettle", "Lamp", "Backpack", "Headphones", "Chair", "Notebook", "Blender", "Drill", "Mug", "Speaker", "Tent")
_CATEGORIES = ("kitchen", "home", "outdoor", "audio", "office", "tools")


def _mix(value: int) -> int:
    """SplitMix64 finaliser: a cheap, well-spread 64-bit hash of an integer."""
    value = (value + _GOLDEN) & _MASK
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & _MASK
    return value ^ (value >> 31)


def format_timestamp(epoch_seconds: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch_seconds))


def parse_timestamp(text: str) -> int:
    """ISO-8601 text -> epoch seconds, rounded up; a space is retried as '+' (an unescaped '+00:00' in a query arrives as ' 00:00')."""
    candidates = [text.strip()]
    if " " in candidates[0]:
        candidates.append(candidates[0].replace(" ", "+"))
    for candidate in candidates:
        try:
            moment = datetime.fromisoformat(candidate)
        except ValueError:
            continue
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        try:
            delta = moment - _EPOCH
        except OverflowError:
            break
        seconds = delta.days * 86_400 + delta.seconds
        return seconds + 1 if delta.microseconds else seconds
    raise ValueError(f"not an ISO-8601 timestamp: {text!r}")


class DemoData:
    """All streams of the demo API for one set of knobs; thread-safe."""

    def __init__(
        self,
        records: int = 10_000,
        seed: int = 42,
        stores: int = 10,
        generation: int = 0,
        touch_count: int | None = None,
    ) -> None:
        if records < 0 or stores < 1 or generation < 0:
            raise ValueError("records >= 0, stores >= 1 and generation >= 0 are required")
        self.records = records
        self.seed = seed
        self.stores_count = stores
        self.products_count = min(1000, max(50, records // 10))
        self.step = max(1, SPAN_SECONDS // max(records, 1))
        self.touch_count = max(1, records // 100) if touch_count is None else touch_count
        if self.touch_count < 0:
            raise ValueError("touch_count must be >= 0")
        seed_key = _mix(seed & _MASK)
        self._salt = {stream: _mix(seed_key ^ salt) for stream, salt in _SALTS.items()}
        self._lock = threading.Lock()
        self._clock = max(T0 + SPAN_SECONDS, T0 + records * self.step)
        self._rounds = dict.fromkeys(TOUCHABLE_STREAMS, 0)
        self._touched: dict[str, dict[int, tuple[int, int]]] = {s: {} for s in TOUCHABLE_STREAMS}
        self._users = Lane(1, 1, records, T0, self.step)
        self._orders = Lane(1, 1, records, T0, self.step)
        self._store_orders = {
            store_id: Lane(store_id, stores, max(0, (records - store_id) // stores + 1), T0, self.step)
            for store_id in range(1, stores + 1)
        }
        for _ in range(generation):
            for stream in TOUCHABLE_STREAMS:
                self.touch(stream, self.touch_count)

    def population(self, stream: str) -> int:
        if stream == "products":
            return self.products_count
        if stream in ("users", "orders"):
            return self.records
        raise ValueError(f"unknown stream {stream!r}; touchable streams: {', '.join(TOUCHABLE_STREAMS)}")

    def touch(self, stream: str, count: int) -> list[int]:
        """Update ``count`` distinct records of ``stream``; ids come from an RNG seeded per round, so every process picks the same."""
        population = self.population(stream)
        if count < 0:
            raise ValueError("count must be >= 0")
        with self._lock:
            round_number = self._rounds[stream]
            self._rounds[stream] += 1
            count = min(count, population)
            if count == 0:
                return []
            rng = random.Random(f"{self.seed}:{stream}:{round_number}")
            ids = sorted(rng.sample(range(1, population + 1), count))
            touched = self._touched[stream]
            moves = []
            for record_id in ids:
                self._clock += 1
                version = touched.get(record_id, (0, 0))[1] + 1
                touched[record_id] = (self._clock, version)
                moves.append((record_id, self._clock))
            if stream == "users":
                self._users.move(moves)
            elif stream == "orders":
                self._orders.move(moves)
                by_store: dict[int, list[tuple[int, int]]] = {}
                for move in moves:
                    by_store.setdefault(self._store_of(move[0]), []).append(move)
                for store_id, store_moves in by_store.items():
                    self._store_orders[store_id].move(store_moves)
            return ids

    def users_page(
        self,
        since: int | None,
        until: int | None,
        after: tuple[int, int] | None,
        limit: int,
    ) -> tuple[list[dict[str, Any]], tuple[int, int] | None]:
        """Users with since <= updatedAt < until after key ``after``, and the last record's key when more match (else None)."""
        with self._lock:
            lane = self._users
            start = lane.rank(since, 0) if since is not None else 0
            if after is not None:
                start = max(start, lane.rank(after[0], after[1] + 1))
            stop = lane.rank(until, 0) if until is not None else len(lane)
            end = min(stop, start + limit)
            page = [self._user(record_id) for record_id in lane.ids(start, end)]
            if page and end < stop:
                last = page[-1]["id"]
                return page, (self._updated_at("users", last), last)
            return page, None

    def orders_page(
        self, start: int | None, end: int | None, page: int, per_page: int
    ) -> tuple[list[dict[str, Any]], int]:
        with self._lock:
            lane = self._orders
            first = lane.rank(start, 0) if start is not None else 0
            stop = lane.rank(end, 0) if end is not None else len(lane)
            total = max(0, stop - first)
            offset = first + (page - 1) * per_page
            ids = lane.ids(offset, min(stop, offset + per_page))
            return [self._order(record_id) for record_id in ids], total

    def store_orders(
        self, store_id: int, since: int | None, offset: int, limit: int
    ) -> tuple[list[dict[str, Any]], bool]:
        """One store's orders with updatedAt >= since from ``offset``; True when more follow. KeyError for an unknown store."""
        lane = self._store_orders[store_id]
        with self._lock:
            first = (lane.rank(since, 0) if since is not None else 0) + offset
            end = min(len(lane), first + limit)
            page = [self._order(record_id) for record_id in lane.ids(first, end)]
            return page, end < len(lane)

    def products_page(self, offset: int, limit: int) -> list[dict[str, Any]]:
        with self._lock:
            last = min(self.products_count, offset + limit)
            return [self._product(record_id) for record_id in range(offset + 1, last + 1)]

    def stores(self) -> list[dict[str, Any]]:
        return [self._store(store_id) for store_id in range(1, self.stores_count + 1)]

    def _updated_at(self, stream: str, record_id: int) -> int:
        state = self._touched[stream].get(record_id)
        if state is not None:
            return state[0]
        if stream == "products":
            return T0 + record_id * 3_600
        return T0 + (record_id - 1) * self.step

    def _version(self, stream: str, record_id: int) -> int:
        state = self._touched[stream].get(record_id)
        return 0 if state is None else state[1]

    def _store_of(self, order_id: int) -> int:
        return (order_id - 1) % self.stores_count + 1

    def _user(self, record_id: int) -> dict[str, Any]:
        h = _mix(self._salt["users"] ^ record_id)
        h2 = _mix(h)
        first = _FIRST_NAMES[h % len(_FIRST_NAMES)]
        last = _LAST_NAMES[(h >> 8) % len(_LAST_NAMES)]
        city, country = _CITIES[(h >> 16) % len(_CITIES)]
        company = _LAST_NAMES[(h2 >> 20) % len(_LAST_NAMES)]
        job = _JOBS[_mix(h2 ^ self._version("users", record_id)) % len(_JOBS)]
        base = T0 + (record_id - 1) * self.step
        return {
            "id": record_id,
            "name": f"{first} {last}",
            "email": f"{first}.{last}{record_id}@{_DOMAINS[(h2 >> 40) % len(_DOMAINS)]}".lower(),
            "address": {
                "street": f"{1 + (h >> 24) % 999} {_STREETS[(h >> 38) % len(_STREETS)]}"
                f" {_STREET_KINDS[(h >> 44) % len(_STREET_KINDS)]}",
                "city": city,
                "zip": str(10_000 + h2 % 90_000),
                "country": country,
            },
            "company": {
                "name": f"{company} {_COMPANY_KINDS[(h2 >> 28) % len(_COMPANY_KINDS)]}",
                "industry": _INDUSTRIES[(h2 >> 34) % len(_INDUSTRIES)],
            },
            "job": job,
            "createdAt": format_timestamp(base - (h2 >> 8) % _NINETY_DAYS),
            "updatedAt": format_timestamp(self._updated_at("users", record_id)),
        }

    def _order(self, record_id: int) -> dict[str, Any]:
        h = _mix(self._salt["orders"] ^ record_id)
        items = []
        amount_cents = 0
        for item in range(1 + (h >> 24) % 3):
            hk = _mix(h + item + 1)
            product_id = 1 + hk % self.products_count
            quantity = 1 + (hk >> 20) % 5
            price_cents = self._price_cents(product_id, 0)
            amount_cents += quantity * price_cents
            items.append({"productId": product_id, "quantity": quantity, "price": price_cents / 100})
        status_hash = _mix(h ^ self._version("orders", record_id))
        base = T0 + (record_id - 1) * self.step
        return {
            "id": record_id,
            "userId": 1 + h % self.records,
            "storeId": self._store_of(record_id),
            "status": _ORDER_STATUSES[status_hash % len(_ORDER_STATUSES)],
            "amount": amount_cents / 100,
            "currency": _CURRENCIES[(h >> 20) % len(_CURRENCIES)],
            "items": items,
            "createdAt": format_timestamp(base - (h >> 32) % _NINETY_DAYS),
            "updatedAt": format_timestamp(self._updated_at("orders", record_id)),
        }

    def _price_cents(self, product_id: int, version: int) -> int:
        return 199 + _mix(_mix(self._salt["products"] ^ product_id) ^ (version * _GOLDEN & _MASK)) % 99_800

    def _product(self, record_id: int) -> dict[str, Any]:
        h = _mix(self._salt["products"] ^ record_id)
        return {
            "id": record_id,
            "name": f"{_ADJECTIVES[h % len(_ADJECTIVES)]} {_NOUNS[(h >> 8) % len(_NOUNS)]}",
            "category": _CATEGORIES[(h >> 16) % len(_CATEGORIES)],
            "price": self._price_cents(record_id, self._version("products", record_id)) / 100,
            "sku": f"SKU-{record_id:06d}",
            "updatedAt": format_timestamp(self._updated_at("products", record_id)),
        }

    def _store(self, record_id: int) -> dict[str, Any]:
        h = _mix(self._salt["stores"] ^ record_id)
        city, _country = _CITIES[h % len(_CITIES)]
        return {
            "id": record_id,
            "name": f"{city} {_STREETS[(h >> 8) % len(_STREETS)]} Store",
            "city": city,
            "openedAt": format_timestamp(T0 - (1 + (h >> 16) % 3_650) * 86_400),
        }
