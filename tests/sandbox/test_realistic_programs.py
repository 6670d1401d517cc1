"""Ordinary model-written Python must compile and run unchanged."""

from __future__ import annotations

import pytest
from sandbox_helpers import Run, ok

pytestmark = pytest.mark.anyio


async def test_classes_dataclasses_and_containers(run: Run) -> None:
    program = '''
from __future__ import annotations
from dataclasses import dataclass, field, asdict
from collections import Counter, defaultdict, namedtuple
from typing import Any, Dict, List, Optional

@dataclass
class Item:
    name: str
    tags: List[str] = field(default_factory=list)
    count: int = 0

@dataclass(frozen=True, order=True)
class Point:
    x: int
    y: int = 0

class Inventory:
    """Tracks items."""
    kind = "inv"

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self.items: Dict[str, Item] = {}
        self.adds = 0

    def add(self, name: str, *tags: str) -> "Inventory":
        item = self.items.setdefault(name, Item(name))
        item.tags.extend(tags)
        item.count += 1
        self.adds += 1
        return self

    @property
    def total(self) -> int:
        return sum(i.count for i in self.items.values())

    @classmethod
    def make(cls, owner):
        return cls(owner)

    @staticmethod
    def label(n):
        return f"#{n:03d}"

    def __repr__(self):
        return f"Inventory({self.owner!r}, {len(self.items)})"

    def __len__(self):
        return len(self.items)

def _normalise(s: str) -> str:
    return s.strip().lower()

inv = Inventory.make("me").add("apple", "fruit").add("apple").add(_normalise("  Pear "))
counts = defaultdict(int)
for word in "a b a c a b".split():
    counts[word] += 1
letters = Counter("mississippi")
Pair = namedtuple("Pair", "left right")
p = Pair(1, 2)
pts = sorted([Point(2, 1), Point(1, 5), Point(1, 2)])
matrix = [[i * j for j in range(3)] for i in range(3)]
evens = {n for n in range(10) if n % 2 == 0}
lookup = {k: v for k, v in zip("abc", range(3))}
first, *rest = [1, 2, 3, 4]
for _ in range(2):
    inv.add("kiwi")
snapshot = [asdict(i) for i in inv.items.values()]
return {
    "repr": repr(inv), "len": len(inv), "total": inv.total, "adds": inv.adds,
    "label": Inventory.label(7), "counts": dict(counts),
    "common": letters.most_common(2), "pair": [p.left, p.right, p[1]],
    "points": [(pt.x, pt.y) for pt in pts][0][0], "matrix": matrix[2],
    "evens": sorted(evens), "lookup": lookup, "rest": rest, "first": first,
    "snapshot": snapshot[0], "kind": inv.kind,
}
'''
    value = ok(await run(program))
    assert value["repr"] == "Inventory('me', 3)"
    assert value["total"] == 5 and value["adds"] == 5 and value["len"] == 3
    assert value["label"] == "#007"
    assert value["counts"] == {"a": 3, "b": 2, "c": 1}
    assert value["common"] == [["i", 4], ["s", 4]] or value["common"] == [["s", 4], ["i", 4]]
    assert value["pair"] == [1, 2, 2] and value["points"] == 1
    assert value["snapshot"] == {"name": "apple", "tags": ["fruit"], "count": 2}
    assert value["rest"] == [2, 3, 4] and value["kind"] == "inv"


async def test_tools_errors_and_control_flow(run: Run) -> None:
    program = """
import asyncio, json

results = []
errors = []
calls = 0

async def safe(name, args):
    global calls
    calls += 1
    try:
        return await tools[name](args)
    except ToolCallError as e:
        errors.append(f"{e.toolName}: {e}")
        return None

def record(x):
    global calls
    calls += 10

for i in range(3):
    r = await safe("echo", {"i": i})
    results.append(r["i"])
await safe("fail", {"message": "nope"})
batch = await asyncio.gather(*(safe("echo", {"j": j}) for j in range(4)))
record(None)

def make_counter():
    n = 0
    def inc():
        nonlocal n
        n += 1
        return n
    return inc

inc = make_counter()
inc(); inc()
summary = {
    "results": results, "errors": errors, "batch": [b["j"] for b in batch],
    "calls": calls, "counter": inc(),
}
print(json.dumps(summary, indent=2, sort_keys=True))
return summary
"""
    result = await run(program)
    value = ok(result)
    assert value == {
        "results": [0, 1, 2], "errors": ["fail: nope"], "batch": [0, 1, 2, 3],
        "calls": 18, "counter": 3,
    }  # fmt: skip
    assert result.logs[0] == "{"


async def test_exceptions_and_type_names(run: Run) -> None:
    program = """
class AppError(Exception):
    def __init__(self, message, code=None):
        super().__init__(message)
        self.code = code

def risky(n):
    if n == 0:
        raise AppError("zero", code=400)
    return 10 / n

out = []
for n in [2, 0, "x"]:
    try:
        out.append(risky(n))
    except AppError as e:
        out.append(f"{e.__class__.__name__}:{e}:{e.code}")
    except Exception as e:
        out.append(f"{type(e).__name__}")
    finally:
        out.append("-")
try:
    assert 1 == 2, "math"
except AssertionError as e:
    out.append(str(e))
return out
"""
    assert ok(await run(program)) == [5.0, "-", "AppError:zero:400", "-", "TypeError", "-", "math"]


async def test_stdlib_modules(run: Run) -> None:
    program = r"""
import re, math, json, datetime, itertools, functools, statistics, string, textwrap
import decimal, fractions, random, uuid, base64, hashlib, difflib, heapq, bisect, copy
from typing import NamedTuple, TypedDict

class P(NamedTuple):
    x: int
    y: int = 0

class Row(TypedDict):
    name: str

@functools.lru_cache(maxsize=None)
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

def deco(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs) * 2
    return wrapper

@deco
def three():
    "doc"
    return 3

random.seed(7)
heap = [5, 1, 4]
heapq.heapify(heap)
sorted_list = [1, 3, 5]
bisect.insort(sorted_list, 4)
original = {"a": [1, {"b": 2}]}
clone = copy.deepcopy(original)
clone["a"][1]["b"] = 3
d = decimal.Decimal("1.10") + decimal.Decimal("2.205")
when = datetime.datetime(2024, 1, 2, 3, 4, 5) + datetime.timedelta(days=1)
return {
    "re": re.findall(r"\d+", "a1 b22 c333"), "sub": re.sub(r"\s+", " ", "a   b"),
    "math": [math.sqrt(16), math.floor(2.7), round(math.pi, 3)],
    "json": json.loads(json.dumps({"k": [1, 2]})),
    "date": when.isoformat(), "parsed": datetime.datetime.strptime("2024-05-06", "%Y-%m-%d").day,
    "chain": list(itertools.chain([1], [2])), "groups": [k for k, _ in itertools.groupby("aabb")],
    "fib": fib(30), "reduce": functools.reduce(lambda a, b: a + b, [1, 2, 3]),
    "partial": functools.partial(int, base=2)("101"), "wrapped": [three(), three.__name__, three.__doc__],
    "mean": statistics.mean([1, 2, 3, 4]), "median": statistics.median([3, 1, 2]),
    "letters": string.ascii_lowercase[:3], "dedent": textwrap.dedent("  a\n  b"),
    "decimal": str(d), "fraction": str(fractions.Fraction(1, 3) + fractions.Fraction(1, 6)),
    "rand": random.randint(1, 100) > 0, "uuid": len(str(uuid.uuid4())),
    "b64": base64.b64encode(b"hi").decode(), "sha": hashlib.sha256(b"x").hexdigest()[:8],
    "diff": list(difflib.unified_diff(["a"], ["b"], lineterm=""))[-2:],
    "heap": heapq.heappop(heap), "bisect": sorted_list, "copy": original["a"][1]["b"],
    "namedtuple": P(1, y=5).y, "typed": Row(name="n")["name"],
    "template": string.Template("$who likes $what").substitute(who="tim", what="pie"),
}
"""
    value = ok(await run(program))
    assert value["re"] == ["1", "22", "333"] and value["sub"] == "a b"
    assert value["math"] == [4.0, 2, 3.142]
    assert value["date"] == "2024-01-03T03:04:05" and value["parsed"] == 6
    assert (
        value["fib"] == 832040 and value["partial"] == 5 and value["wrapped"] == [6, "three", "doc"]
    )
    assert value["decimal"] == "3.305" and value["fraction"] == "1/2"
    assert value["b64"] == "aGk=" and value["sha"] == "2d711642"
    assert value["diff"] == ["-a", "+b"] and value["copy"] == 2 and value["bisect"] == [1, 3, 4, 5]
    assert value["namedtuple"] == 5 and value["typed"] == "n"
    assert value["template"] == "tim likes pie"


async def test_strings_and_formatting(run: Run) -> None:
    program = """
name, score = "Ada", 93.456
items = ["x", "y"]
return [
    f"{name:>5}|{score:.1f}|{len(items)}",
    "{} scored {:.2f}".format(name, score),
    "{name} {0}".format(1, name=name),
    "{p[0]}-{p[1]}".format(p=items),
    "%s=%d" % ("n", 5),
    ", ".join(sorted(items, reverse=True)),
    "Hello World".lower().replace("world", "there").title(),
    "a,b,,c".split(","),
    " pad ".strip(),
    "abc"[::-1],
    "x".center(5, "*"),
    str(3) + repr("q"),
]
"""
    assert ok(await run(program)) == [
        "  Ada|93.5|2", "Ada scored 93.46", "Ada 1", "x-y", "n=5", "y, x", "Hello There",
        ["a", "b", "", "c"], "pad", "cba", "**x**", "3'q'",
    ]  # fmt: skip


async def test_async_generators_context_managers_and_walrus(run: Run) -> None:
    program = """
import asyncio

class Timer:
    def __init__(self):
        self.entered = False
        self.exited = False
    def __enter__(self):
        self.entered = True
        return self
    def __exit__(self, exc_type, exc, tb):
        self.exited = True
        return False

class AsyncRes:
    async def __aenter__(self):
        return "res"
    async def __aexit__(self, *exc):
        return False

async def numbers(n):
    for i in range(n):
        await asyncio.sleep(0)
        yield i

collected = [x async for x in numbers(3)]
async for y in numbers(2):
    collected.append(y * 10)
with Timer() as t:
    pass
async with AsyncRes() as r:
    got = r
data = [1, 5, 9]
if (n := len(data)) > 2:
    big = n
square = lambda v: v * v
return [collected, t.entered, t.exited, got, big, list(map(square, data)),
        list(filter(None, [0, 1, 2])), any(x > 8 for x in data), all(data),
        max(data, key=lambda v: -v), min(data), sum(data), list(enumerate("ab")),
        list(reversed(data)), divmod(7, 2), abs(-3), isinstance(t, Timer)]
"""
    assert ok(await run(program)) == [
        [0, 1, 2, 0, 10], True, True, "res", 3, [1, 25, 81], [1, 2], True, True, 1, 1, 15,
        [[0, "a"], [1, "b"]], [9, 5, 1], [3, 1], 3, True,
    ]  # fmt: skip


async def test_item_and_attribute_augmented_assignment(run: Run) -> None:
    program = """
class C:
    def __init__(self):
        self.n = 1
        self.tags = []

c = C()
c.n += 41
c.tags += ["a"]
d = {"k": 1, "l": [1]}
d["k"] *= 10
d["l"] += [2]
grid = [[0] * 2 for _ in range(2)]
grid[1][0] -= 5
xs = [1, 2, 3, 4]
xs[1:3] += []
def key():
    key.calls += 1
    return "k"
key.calls = 0
d[key()] += 1
return [c.n, c.tags, d, grid, xs, key.calls]
"""
    assert ok(await run(program)) == [
        42,
        ["a"],
        {"k": 11, "l": [1, 2]},
        [[0, 0], [-5, 0]],
        [1, 2, 3, 4],
        1,
    ]


async def test_global_and_top_level_names(run: Run) -> None:
    program = """
counter = 0
seen = []

def bump(n=1):
    global counter
    counter += n
    seen.append(counter)

class Registry:
    entries = []
    @classmethod
    def register(cls, item):
        global counter
        counter += 100
        cls.entries.append(item)

bump(); bump(2)
Registry.register("x")
return [counter, seen, Registry.entries]
"""
    assert ok(await run(program)) == [103, [1, 3], ["x"]]


async def test_semaphore_free_batching_pattern(run: Run) -> None:
    program = """
import asyncio
paths = [f"f{i}.txt" for i in range(25)]
results = {}
for start in range(0, len(paths), 10):
    chunk = paths[start:start + 10]
    outs = await asyncio.gather(*[tools.echo({"path": p}) for p in chunk])
    for p, out in zip(chunk, outs):
        results[p] = out["path"].upper()
print(f"processed {len(results)} files")
return sorted(results.values())[:3]
"""
    result = await run(program)
    assert ok(result) == ["F0.TXT", "F1.TXT", "F10.TXT"] and result.logs == ["processed 25 files"]


async def test_dataclass_variants_generics_and_protocols(run: Run) -> None:
    program = """
from dataclasses import dataclass, replace
from typing import ClassVar, Generic, Protocol, TypeVar
T = TypeVar("T")

@dataclass(slots=True)
class S:
    a: int
    b: "str" = "x"

@dataclass(frozen=True)
class F:
    a: int
    tags: ClassVar[int] = 3

class Box(Generic[T]):
    def __init__(self, v: T):
        self.v = v

class HasSize(Protocol):
    def size(self) -> int: ...

s = S(1)
s.a = 5
f = F(2)
try:
    f.a = 3
    frozen = "no"
except Exception as e:
    frozen = type(e).__name__
b = Box[int](4)
b.v += 1
return [s.a, s.b, replace(f, a=9).a, frozen, b.v, F.tags]
"""
    assert ok(await run(program)) == [5, "x", 9, "FrozenInstanceError", 5, 3]


async def test_a_bounded_fan_out_as_models_write_it(run: Run) -> None:
    # Semaphore-bounded gather, as_completed, match on the results, namedtuple summary,
    # a call with no arguments, and except* around a task group.
    async def job_list(args: object) -> object:
        assert args == {}
        return {"jobs": [{"id": i, "state": s} for i, s in enumerate(["ok", "failed", "ok"])]}

    async def job_log(args: dict[str, object]) -> object:
        return {"id": args["id"], "lines": ["boom"] if args["id"] == 1 else []}

    program = """
import asyncio
from collections import namedtuple

Summary = namedtuple("Summary", "ok failed logs")

jobs = (await tools.job_list())["jobs"]
sem = asyncio.Semaphore(2)

async def fetch(job):
    async with sem:
        return job, await tools.job_log({"id": job["id"]})

ok, failed, logs = [], [], {}
for next_done in asyncio.as_completed([fetch(j) for j in jobs]):
    job, log = await next_done
    match job:
        case {"state": "ok", "id": job_id}:
            ok.append(job_id)
        case {"state": "failed", "id": job_id}:
            failed.append(job_id)
            logs[str(job_id)] = log["lines"]

try:
    async with asyncio.TaskGroup() as tg:
        tg.create_task(tools.job_log({"id": "x"}))
        tg.create_task(tools.nope({}))
except* ToolCallError as group:
    print(sorted(e.toolName for e in group.exceptions))

s = Summary(sorted(ok), failed, logs)
return s._asdict()
"""
    result = await run(program, tools={"job_list": job_list, "job_log": job_log})
    assert ok(result) == {"ok": [0, 2], "failed": [1], "logs": {"1": ["boom"]}}
    assert result.logs == ["['nope']"]


async def test_private_attributes_on_the_programs_own_classes(run: Run) -> None:
    program = """
class Base:
    def __init__(self):
        self._items = []
        self._count = 0

    def _check(self, x):
        return x is not None

class Cache(Base):
    _registry = {}

    def add(self, x):
        if super()._check(x):
            self._items.append(x)
            self._count += 1
            Cache._registry[x] = self
        return self

class NotFound(Exception):
    def __init__(self, key):
        super().__init__(key)
        self._key = key

c = Cache().add('a').add(None).add('b')
setattr(c, '_extra', 5)
extra = c._extra
del c._extra
try:
    raise NotFound('k')
except NotFound as e:
    key = e._key
return [c._items, c._count, sorted(Cache._registry), getattr(c, '_count'), extra,
        hasattr(c, '_extra'), getattr(c, '_nope', 'default'), key]
"""
    assert ok(await run(program)) == [["a", "b"], 2, ["a", "b"], 2, 5, False, "default", "k"]
