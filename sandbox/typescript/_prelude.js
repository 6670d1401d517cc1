// The QuickJS guest's prelude. Evaluated once per Context before any program code; its
// completion value is `setup`, which Python calls once and which returns `host`, the
// only function Python ever calls (ops below). Nothing here calls into Python: calls go
// to an outbox and results come back through `host(SETTLE, ...)`.
//
// Everything the prelude relies on is captured here first (primordials), so a program
// that replaces `JSON`, `Promise`, `Array.prototype.push`, `console` or `tools` breaks
// only itself. Containers the host reads are null-prototype, so polluting
// `Object.prototype` or `Array.prototype` cannot inject keys or setters into them.
//
// Positions: the program is compiled by indirect eval after `pad` blank lines, so its
// frames have line numbers above every prelude line; stacks keep only those frames and
// render them as `    at <program>:LINE` or `    at name (<program>:LINE)`.
//
// Host ops (Python calls `host(op, ...)`): 0 FLAGS -> bit 1 out of memory, bit 2 output
// flood, bit 4 stack overflow, bit 8 a denied write to a binding namespace (the message is
// FORBIDDEN_MESSAGE, read with op 6); 1 INSTALL(bindingsJson); 2 RUN(source, lines, guardName); 3 SETTLE(id, ok,
// payloadJsonOrMessage, code); 4 POLL -> JSON {logs, calls, state, timer, outstanding};
// 5 FIRE_TIMER -> 1 when a due timer ran; 6 FORBIDDEN_MESSAGE -> the first denial's text.
(function setup(makeInspect, configJson) {
  "use strict";
  const { apply: ReflectApply, ownKeys: ReflectOwnKeys } = Reflect;
  const {
    create: ObjectCreate, defineProperty: ObjectDefineProperty, keys: ObjectKeys,
    getPrototypeOf: ObjectGetPrototypeOf, getOwnPropertyDescriptor: ObjectGetOwnPropertyDescriptor,
    getOwnPropertySymbols: ObjectGetOwnPropertySymbols, is: ObjectIs, hasOwn: ObjectHasOwn,
  } = Object;
  const uncurry = (fn) => (self, ...args) => ReflectApply(fn, self, args);
  const getter = (proto, key) => uncurry(ObjectGetOwnPropertyDescriptor(proto, key).get);
  const brand = (check) => (value) => { try { check(value); return true; } catch { return false; } };
  const maybe = (fn) => (value) => { try { return fn(value); } catch { return undefined; } };

  const global = globalThis;
  const OrigError = Error, OrigTypeError = TypeError, OrigRangeError = RangeError;
  const OrigSyntaxError = SyntaxError, RangeErrorPrototype = RangeError.prototype;
  const ObjectFreeze = Object.freeze, OrigProxy = Proxy;
  const OrigPromise = Promise, OrigString = String, OrigMap = Map, OrigSet = Set;
  const OrigEval = eval, NumberIsFinite = Number.isFinite, OrigArrayBuffer = ArrayBuffer;
  const ErrorPrototype = Error.prototype, ArrayPrototype = Array.prototype;
  const ObjectPrototype = Object.prototype, InternalErrorPrototype = InternalError.prototype;
  const ErrorIsError = Error.isError;
  const JSONStringify = JSON.stringify, JSONParse = JSON.parse, ArrayIsArray = Array.isArray;
  const ArrayJoin = uncurry(Array.prototype.join), StringRepeat = uncurry(String.prototype.repeat);
  const StringSliceRaw = uncurry(String.prototype.slice);
  const isPrototypeOf = uncurry(Object.prototype.isPrototypeOf);
  const WeakMapHas = uncurry(WeakMap.prototype.has), WeakSetHas = uncurry(WeakSet.prototype.has);
  const SetHas = uncurry(Set.prototype.has), SetAdd = uncurry(Set.prototype.add);
  const SetDelete = uncurry(Set.prototype.delete);
  const MathMax = Math.max, PromiseThen = Promise.prototype.then;
  const perf = performance, perfNow = uncurry(performance.now);
  const now = () => perfNow(perf);
  const AsyncFunctionPrototype = ObjectGetPrototypeOf(async function () {});
  const GeneratorFunctionPrototype = ObjectGetPrototypeOf(function* () {});
  const AsyncGeneratorFunctionPrototype = ObjectGetPrototypeOf(async function* () {});
  const TypedArrayPrototype = ObjectGetPrototypeOf(Uint8Array.prototype);
  const RegExpExec = uncurry(RegExp.prototype.exec);
  const ObjectSetPrototypeOf = Object.setPrototypeOf;
  const list = () => { const array = []; ObjectSetPrototypeOf(array, null); return array; };
  const push = (array, item) => { array[array.length] = item; };

  const config = JSONParse(configJson);
  const LINE_BASE = config.pad + 1;  // the wrapper's line; program line N is LINE_BASE + N
  const PAD = StringRepeat("\n", config.pad);
  const MAX_LOG_UNITS = config.maxOutputBytes;
  const OOM = 1, OUTPUT = 2, RECURSION = 4, FORBIDDEN = 8;
  // What quickjs-ng throws when the native stack runs out (a RangeError with no stack).
  const STACK_OVERFLOW = "Maximum call stack size exceeded";
  const INVALID_OUTPUT = "program completion must be lossless JSON";
  const BAD_ARGS = "binding arguments must be lossless JSON";
  const BAD_RESOLUTION = "binding resolution must be lossless JSON";
  const UNRENDERABLE = "program threw an unrenderable value";
  const OUTPUT_EXCEEDED = `outer output exceeded ${config.maxOutputBytes} bytes`;
  const MEMORY_EXCEEDED = `memory limit exceeded (${config.memoryBytes} bytes)`;

  // -- run state --------------------------------------------------------------------
  let flags = 0, state = null, programLines = 0, compiling = false, forbidden = "";
  let nextCallId = 0, outstanding = 0, logUnits = 2, timerSeq = 0;
  const logs = list(), outbox = list();
  const pending = ObjectCreate(null), timers = ObjectCreate(null);
  const params = list(), values = list();

  // -- stacks -----------------------------------------------------------------------
  // `prepareStackTrace` runs inside the engine's error construction, which swallows any
  // exception it throws, the time-limit interrupt included. A call or a branch can poll
  // that interrupt, and a poll that keeps landing here would make the limit unreachable
  // (`while (true) try { throw new Error() } catch {}` never stopped), so the hook makes
  // neither: it returns the raw call sites, and the `stack` accessor renders them on
  // first read, as V8 renders lazily (a `name` set after construction shows).
  const RAW = Symbol("raw stack");
  const stackAccessor = ObjectGetOwnPropertyDescriptor(ErrorPrototype, "stack");
  const stackGet = uncurry(stackAccessor.get);
  // V8 keeps `stack` as an own, non-enumerable data property; the engine's setter would
  // make an enumerable one (it would show in `Object.keys(error)`).
  const defineStack = (object, value) =>
    ObjectDefineProperty(object, "stack", { value, writable: true, configurable: true });
  const OrigCaptureStackTrace = Error.captureStackTrace;
  OrigError.prepareStackTrace = (error, sites) => ({ [RAW]: true, sites, compiling });
  OrigError.stackTraceLimit = config.stackTraceLimit;
  // The engine keeps both in hidden slots; lock the accessors so programs cannot swap them.
  for (const key of ["prepareStackTrace", "stackTraceLimit"]) {
    ObjectDefineProperty(OrigError, key, { get() { return undefined; }, set(_) {}, configurable: false });
  }
  const isRaw = (value) => typeof value === "object" && value !== null && value[RAW] === true;

  function frameText(sites, atTopLevel) {
    let text = "";
    for (let i = 0; i < sites.length; i++) {
      const site = sites[i];
      const line = site.getLineNumber();
      if (typeof line !== "number" || line <= LINE_BASE || line > LINE_BASE + programLines) continue;
      const name = site.getFunctionName();
      const where = `<program>:${line - LINE_BASE}`;
      if (name === "__program__" || (atTopLevel && !name)) text += `\n    at ${where}`;
      else text += `\n    at ${site.isConstructor() ? "new " : ""}${name || "<anonymous>"} (${where})`;
    }
    return text;
  }

  function errorHeader(error) {
    const name = error.name === undefined ? "Error" : OrigString(error.name);
    const message = error.message === undefined ? "" : OrigString(error.message);
    if (name === "") return message;
    if (message === "") return name;
    return `${name}: ${message}`;
  }

  const renderRaw = (error, raw) => errorHeader(error) + frameText(raw.sites, raw.compiling);

  ObjectDefineProperty(ErrorPrototype, "stack", {
    get() {
      let raw;
      try { raw = stackGet(this); } catch { return undefined; }
      if (!isRaw(raw)) return raw;
      const text = renderRaw(this, raw);
      try { defineStack(this, text); } catch {}  // a frozen error renders on every read
      return text;
    },
    set(value) { defineStack(this, value); },
    configurable: false,
  });
  ObjectDefineProperty(OrigError, "captureStackTrace", {
    value: function captureStackTrace(object, constructorOpt) {
      ReflectApply(OrigCaptureStackTrace, OrigError, [object, constructorOpt]);
      const own = ObjectGetOwnPropertyDescriptor(object, "stack");
      if (own !== undefined && isRaw(own.value)) object.stack = renderRaw(object, own.value);
    },
    writable: true,
    configurable: true,
  });

  // QuickJS lets programs catch its memory errors, and throws `null` when it cannot even
  // allocate one. Every caught or uncaught value passes through here (catch clauses are
  // rewritten to call it, see _catch.py), so a caught memory failure still ends the
  // run. A program's own `throw null` is reported as one too.
  // A stack overflow is terminal the same way (Python's RecursionError is): the engine's
  // own RangeError carries no stack, which tells it from a program's `new RangeError(...)`.
  function guard(value) {
    if (value === null) {
      flags |= OOM;
    } else if (typeof value === "object") {
      const proto = ObjectGetPrototypeOf(value);
      if (proto === InternalErrorPrototype) {
        // The engine's out-of-memory error, or one it ran out of memory building: then
        // the message never got set and reads as the prototype's "" (a program's own
        // `new InternalError()` reads the same and is reported as memory too).
        try {
          const message = value.message;
          if (message === "out of memory" || message === "") flags |= OOM;
        } catch { flags |= OOM; }
      } else if (proto === RangeErrorPrototype) {
        try {
          if (value.message === STACK_OVERFLOW && !isRaw(stackGet(value))) flags |= RECURSION;
        } catch {}
      }
    }
    return value;
  }
  // What catch clauses and rejection handlers call: once the run is doomed (memory,
  // output flood, stack overflow, a denial), handing the value on would let a
  // `for (;;) try {...} catch {}` spin on until the compute budget's interrupt, which is
  // not a reliable end (see the stack hook above: the engine swallows an interrupt that
  // lands in some of its own machinery); rethrowing ends the slice, which reports the flag.
  function programGuard(value) {
    guard(value);
    if (flags !== 0) throw value;
    return value;
  }
  // Rejection handlers (`.catch`, `.then(_, f)`, and those Promise.all/allSettled/...
  // attach through `then`) see the value through the guard as well.
  ObjectDefineProperty(OrigPromise.prototype, "then", {
    value: {
      then(onFulfilled, onRejected) {
        if (typeof onRejected === "function") {
          const handler = onRejected;
          onRejected = (reason) => ReflectApply(handler, undefined, [programGuard(reason)]);
        }
        return ReflectApply(PromiseThen, this, [onFulfilled, onRejected]);
      },
    }.then,
    writable: true,
    configurable: true,
  });

  const isErrorValue = (value) => typeof value === "object" && value !== null &&
    (ErrorIsError(value) || isPrototypeOf(ErrorPrototype, value));

  // Node's `error.stack ?? message`, except that a stack-less error (QuickJS keeps none
  // for stack overflows) shows its `Name: message` header.
  function stackOf(error) {
    const stack = error.stack;
    return stack !== undefined && stack !== null && stack !== "" ? OrigString(stack) : errorHeader(error);
  }

  function renderThrown(value) {
    try {
      return isErrorValue(value) ? stackOf(value) : OrigString(value);
    } catch {
      return UNRENDERABLE;
    }
  }

  // -- lossless JSON ----------------------------------------------------------------
  // Returns the compact JSON text of `root`, or undefined when `root` is not lossless
  // JSON; then `jsonProblem` says where and why ([frame, problem], rendered by
  // `describeProblem` only on failure, so success pays nothing for paths). Each property
  // is read exactly once (a getter runs once and may throw), and the text is built from
  // those reads, so what the host receives is what was checked. Iterative: nesting depth
  // is bounded by memory, not by the native stack.
  let jsonProblem = null;
  function toJson(root) {
    const parts = list(), path = new OrigSet();
    let value = root, frame = null;
    const refuse = (problem) => { jsonProblem = [frame, problem, value]; return undefined; };
    for (;;) {
      const type = typeof value;
      if (value === null) push(parts, "null");
      else if (type === "string") push(parts, JSONStringify(value));
      else if (type === "boolean") push(parts, value ? "true" : "false");
      else if (type === "number") {
        if (!NumberIsFinite(value) || ObjectIs(value, -0)) return refuse("number");
        push(parts, JSONStringify(value));
      } else if (type === "object") {
        if (SetHas(path, value)) return refuse("cycle");
        const keys = ReflectOwnKeys(value);
        if (ArrayIsArray(value)) {
          const length = value.length;
          if (ObjectGetPrototypeOf(value) !== ArrayPrototype) return refuse("instance");
          if (keys.length !== length + 1) return refuse("array");
          for (let i = 0; i < length; i++) if (keys[i] !== `${i}`) return refuse("array");
          frame = { value, keys: null, next: 0, length, parent: frame };
          push(parts, "[");
        } else {
          const proto = ObjectGetPrototypeOf(value);
          if (proto !== ObjectPrototype && proto !== null) return refuse("instance");
          for (let i = 0; i < keys.length; i++) {
            if (typeof keys[i] !== "string") return refuse("symbol-key");
            const desc = ObjectGetOwnPropertyDescriptor(value, keys[i]);
            if (desc === undefined || !desc.enumerable) return refuse("hidden-key");
          }
          frame = { value, keys, next: 0, length: keys.length, parent: frame };
          push(parts, "{");
        }
        SetAdd(path, value);
      } else {
        return refuse(type);  // undefined, function, symbol, bigint
      }
      for (;;) {
        if (frame === null) return ArrayJoin(parts, "");
        if (frame.next < frame.length) {
          const i = frame.next++;
          if (i > 0) push(parts, ",");
          if (frame.keys === null) {
            value = frame.value[i];
          } else {
            push(parts, `${JSONStringify(frame.keys[i])}:`);
            value = frame.value[frame.keys[i]];
          }
          break;
        }
        push(parts, frame.keys === null ? "]" : "}");
        SetDelete(path, frame.value);
        frame = frame.parent;
      }
    }
  }

  // `arguments.limit`, `$.tags[2]`: the path of the value `toJson` refused. Long keys
  // and deep paths are elided (a message names a place; it need not copy the data).
  const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
  const MAX_KEY_UNITS = 64, PATH_ENDS = 16;
  function problemPath(root, frame) {
    const steps = list();
    for (let f = frame; f !== null; f = f.parent) push(steps, f);
    let text = root;
    for (let i = steps.length - 1; i >= 0; i--) {
      const depth = steps.length - 1 - i;
      if (depth === PATH_ENDS && i >= PATH_ENDS) {
        text += "…";
        i = PATH_ENDS;
        continue;
      }
      const f = steps[i], index = f.next - 1;
      if (f.keys === null) text += `[${index}]`;
      else {
        let key = f.keys[index];
        if (key.length > MAX_KEY_UNITS) key = `${StringSliceRaw(key, 0, MAX_KEY_UNITS)}…`;
        text += RegExpExec(IDENTIFIER, key) !== null ? `.${key}` : `[${JSONStringify(key)}]`;
      }
    }
    return text;
  }

  // What the refused value is, and what to do instead; `giving` is "pass" for binding
  // arguments and "return" for the program's result.
  function problemText(problem, value, inArray, giving) {
    switch (problem) {
      case "undefined":
        return inArray ? "is undefined — use null" : "is undefined — omit the key or pass null";
      case "function": return `is a function — ${giving} its result instead`;
      case "symbol": return `is a symbol — ${giving} a string`;
      case "bigint": return `is a bigint — ${giving} a number or a string`;
      case "number": return `is ${ObjectIs(value, -0) ? "-0" : OrigString(value)} — JSON has no ${ObjectIs(value, -0) ? "-0; use 0" : "NaN or Infinity; use null or a string"}`;
      case "cycle": return "is a circular reference — JSON cannot hold cycles";
      case "array": return "is an array with holes or extra properties — use a plain array";
      case "symbol-key": return "has a symbol key — use string keys";
      case "hidden-key": return "has a non-enumerable property — use a plain object";
      default: break;
    }
    let kind;
    try {
      if (isPrototypeOf(OrigPromise.prototype, value)) return "is a Promise — did you forget await?";
      if (brand(MapSize)(value)) return `is a Map — ${giving} an object or array (Object.fromEntries(map))`;
      if (brand(SetSize)(value)) return `is a Set — ${giving} an array ([...set])`;
      if (brand(DateGetTimeRaw)(value)) return `is a Date — ${giving} date.toISOString()`;
      const ctor = ObjectGetOwnPropertyDescriptor(ObjectGetPrototypeOf(value), "constructor");
      kind = ctor !== undefined && typeof ctor.value === "function" ? ctor.value.name : "";
    } catch { kind = ""; }
    return `is ${kind ? `a ${OrigString(kind)} instance` : "not a plain object"} — ${giving} a plain object or array`;
  }
  const MapSize = getter(Map.prototype, "size"), SetSize = getter(Set.prototype, "size");
  const DateGetTimeRaw = uncurry(Date.prototype.getTime);

  function describeProblem(root, giving) {
    if (jsonProblem === null) return "";
    // Indexed, not destructured: a program may have replaced the array iterator.
    const frame = jsonProblem[0], problem = jsonProblem[1], value = jsonProblem[2];
    jsonProblem = null;
    let detail;
    try {
      detail = problemText(problem, value, frame !== null && frame.keys === null, giving);
    } catch { detail = "is not lossless JSON"; }
    return `${problemPath(root, frame)} ${detail}`;
  }

  // -- console ----------------------------------------------------------------------
  const inspect = makeInspect(makePrimordials(), stackOf);
  // Thrown as they are: building a fresh error per call would run the stack hook.
  const DOOMED_OUTPUT = new OrigError(OUTPUT_EXCEEDED), DOOMED_MEMORY = new OrigError(MEMORY_EXCEEDED);
  const doomed = () => (flags & OUTPUT ? DOOMED_OUTPUT : DOOMED_MEMORY);
  function emit(args) {
    if (flags !== 0) throw doomed();
    if (state !== null) return;  // the run is over; nothing after it is program output
    let line = "";
    for (let i = 0; i < args.length; i++) {
      const arg = args[i];
      line += (i === 0 ? "" : " ") + (typeof arg === "string" ? arg : inspect(arg));
    }
    // Every UTF-16 unit costs at least one byte of the ledger, so no more than this can
    // be kept; cutting here keeps a 50 MB entry's kept prefix from costing three more
    // copies of it on the way out (which could exhaust the heap and lose the prefix).
    if (line.length > MAX_LOG_UNITS) line = StringSliceRaw(line, 0, MAX_LOG_UNITS);
    push(logs, line);
    // UTF-16 units are a lower bound of the entry's JSON UTF-8 bytes (Python meters
    // exactly); once even the bound is over budget, stop the flood here.
    logUnits += line.length + 3;
    if (logUnits > MAX_LOG_UNITS) flags |= OUTPUT;
  }
  const consoleObject = {};
  for (const method of ["log", "info", "warn", "error", "debug"]) {
    const fn = { [method](...args) { emit(args); } }[method];
    ObjectDefineProperty(consoleObject, method, { value: fn, writable: true, enumerable: true, configurable: true });
  }

  // -- bindings ---------------------------------------------------------------------
  function makeErrorClass(className, member) {
    const ErrorClass = class extends OrigError {
      constructor(message, toolName, code) {
        super(message);
        ObjectDefineProperty(this, "name", { value: className, writable: true, configurable: true });
        if (toolName !== undefined) {
          ObjectDefineProperty(this, member, { value: toolName, writable: true, enumerable: true, configurable: true });
        }
        // A failed call always carries `code`, null when the failure has none (as the
        // SDK says and Python's `e.code` is None); a program's own `new` may omit it.
        if (code !== undefined) {
          ObjectDefineProperty(this, "code", { value: code, writable: true, enumerable: true, configurable: true });
        }
      }
    };
    ObjectDefineProperty(ErrorClass, "name", { value: className });
    ObjectDefineProperty(ErrorClass.prototype, "name", { value: className, writable: true, configurable: true });
    return ErrorClass;
  }

  // A binding behaves as an async function (and is one to `Object.prototype.toString`
  // and the inspector: its prototype is AsyncFunction.prototype) but is a plain function
  // returning the call's promise: the program's `await` then resumes in the job that
  // settles it. An async function awaiting that promise cost one more job per sub-call
  // (a QuickJS entry and its time-limit set-up), and returning it from an async function
  // two more (a thenable job through the guarded `then`). Whatever an async function
  // would throw is a rejection instead, as its promise would be.
  function callBinding(name, ErrorClass, head, args) {
    if (flags !== 0) throw doomed();
    const raw = stackGet(new OrigError());  // where the program called the tool
    const sites = isRaw(raw) ? raw.sites : [];
    // `tools.job_list()` means "no arguments", as it does in Python.
    const json = args === undefined ? "{}" : toJson(args);
    if (json === undefined) {
      throw new OrigTypeError(`${BAD_ARGS}: ${describeProblem("arguments", "pass")}`);
    }
    const id = ++nextCallId;
    return new OrigPromise((resolve, reject) => {
      pending[id] = { resolve, reject, name, ErrorClass, sites };
      outstanding += 1;
      push(outbox, [id, head, json]);
    });
  }

  function makeBinding(globalName, name, ErrorClass) {
    // The call's names as the poll writes them, made once per binding.
    const head = `${JSONStringify(globalName)},${JSONStringify(name)}`;
    // An arrow function: neither constructible nor with a `prototype`, as an async one.
    const binding = (args) => {
      try {
        return callBinding(name, ErrorClass, head, args);
      } catch (error) {
        return new OrigPromise((_, reject) => reject(error));
      }
    };
    ObjectSetPrototypeOf(binding, AsyncFunctionPrototype);
    ObjectDefineProperty(binding, "name", { value: name });
    return binding;
  }

  function install(bindingsJson) {
    const bindings = JSONParse(bindingsJson);
    for (let b = 0; b < bindings.length; b++) {
      const [globalName, names, className, member] = bindings[b];
      const ErrorClass = className === null ? null : makeErrorClass(className, member);
      const namespace = ObjectCreate(null);
      for (let i = 0; i < names.length; i++) {
        ObjectDefineProperty(namespace, names[i], {
          value: makeBinding(globalName, names[i], ErrorClass),
          writable: false, enumerable: true, configurable: false,
        });
      }
      push(params, globalName);
      push(values, guardedNamespace(globalName, ObjectFreeze(namespace), names));
      if (ErrorClass !== null) { push(params, className); push(values, ErrorClass); }
    }
    push(params, "console");
    push(values, consoleObject);
  }

  // The namespace a program sees: the frozen object of bindings behind a proxy that names
  // the tools there are when the program asks for one that is not (instead of QuickJS's
  // `not a function`), and that makes a write terminal (`forbidden`), as Python's guards
  // do: a program that could replace `tools.x` could fake what it reports a tool said.
  function guardedNamespace(globalName, target, names) {
    const available = names.length ? ArrayJoin(names, ", ") : "(none)";
    const deny = (what) => {
      const message = `${globalName} is read-only: cannot ${what}`;
      if (!(flags & FORBIDDEN)) forbidden = message;
      flags |= FORBIDDEN;
      throw new OrigTypeError(message);
    };
    const keyText = (key) => (typeof key === "string" ? key : OrigString(key));
    return new OrigProxy(target, {
      get(t, key) {
        if (ObjectHasOwn(t, key)) return t[key];
        // Probes that are not tool calls (`await tools`, JSON, inspection) see nothing.
        if (typeof key !== "string" || key === "then" || key === "toJSON" || key === "constructor") {
          return undefined;
        }
        throw new OrigTypeError(`unknown tool ${globalName}.${key}; available: ${available}`);
      },
      set(t, key) { return deny(`set ${globalName}.${keyText(key)}`); },
      defineProperty(t, key) { return deny(`define ${globalName}.${keyText(key)}`); },
      deleteProperty(t, key) { return deny(`delete ${globalName}.${keyText(key)}`); },
      setPrototypeOf() { return deny(`set the prototype of ${globalName}`); },
    });
  }

  function settle(id, ok, payload, code) {
    const entry = pending[id];
    if (entry === undefined) return 0;  // unknown or already settled: dropped
    delete pending[id];
    outstanding -= 1;
    if (ok) {
      let value;
      try { value = JSONParse(payload); } catch { entry.reject(new OrigError(BAD_RESOLUTION)); return 1; }
      entry.resolve(value);
      return 1;
    }
    const error = entry.ErrorClass === null
      ? new OrigError(payload) : new entry.ErrorClass(payload, entry.name, code);
    // The rejection's frames are where the program called the tool, not where we are.
    defineStack(error, errorHeader(error) + frameText(entry.sites, false));
    entry.reject(error);
    return 1;
  }

  // -- program ----------------------------------------------------------------------
  function finish(value) {
    if (state !== null) return;
    let json = null, problem = "";
    if (value !== undefined) {
      try {
        json = toJson(value);
        if (json === undefined) problem = describeProblem("$", "return");
      } catch { json = undefined; jsonProblem = null; }
    }
    if (json !== undefined) { state = ["done", json]; return; }
    const where = problem === "" ? ""
      : StringSliceRaw(problem, 0, 2) === "$ " ? `: the program's result ${StringSliceRaw(problem, 2)}`
        : `: the program's result at ${problem}`;
    state = ["failed", "invalid-output", INVALID_OUTPUT + where];
  }
  function fail(kind, message) { if (state === null) state = ["failed", kind, message]; }

  async function runner(program) {
    let value;
    try {
      value = await ReflectApply(program, undefined, values);
    } catch (error) {
      fail("exception", renderThrown(guard(error)));
      return;
    }
    finish(value);
  }

  function run(source, lines, guardName) {
    programLines = lines;
    push(params, guardName);
    push(values, programGuard);
    const header = `(async function __program__(${ArrayJoin(params, ", ")}) {"use strict";\n`;
    let program;
    compiling = true;
    try {
      program = OrigEval(`${PAD}${header}${source}\n})`);
    } catch (error) {
      // Parse errors the host's stripper let through (QuickJS is stricter in places).
      const kind = isPrototypeOf(OrigSyntaxError.prototype, error) ? "syntax" : "exception";
      fail(kind, renderThrown(guard(error)));
      return;
    } finally {
      compiling = false;
    }
    runner(program);
  }

  // -- timers: real delays, fired by the driver between slices ----------------------
  function setTimer(callback, delay, args, repeat) {
    if (typeof callback !== "function") throw new OrigTypeError('The "callback" argument must be of type function');
    delay = +delay;
    if (!(delay >= 1 && delay <= 2147483647)) delay = 1;
    const id = ++timerSeq;
    timers[id] = { callback, args, due: now() + delay, interval: repeat ? delay : 0 };
    return id;
  }
  function clearTimer(id) { if (typeof id === "number") delete timers[id]; }
  function nextTimer() {
    let best;
    const ids = ObjectKeys(timers);  // integer keys: creation order
    for (let i = 0; i < ids.length; i++) {
      const timer = timers[ids[i]];
      if (best === undefined || timer.due < timers[best].due) best = ids[i];
    }
    return best;
  }
  function timerDelay() {
    const id = nextTimer();
    return id === undefined ? -1 : MathMax(0, timers[id].due - now());
  }
  function fireTimer() {
    const id = nextTimer();
    if (id === undefined || state !== null || flags !== 0) return 0;
    const timer = timers[id];
    if (timer.due > now()) return 0;
    if (timer.interval) timer.due = now() + timer.interval;
    else delete timers[id];
    try {
      ReflectApply(timer.callback, undefined, timer.args);
    } catch (error) {
      fail("exception", renderThrown(guard(error)));
    }
    return 1;
  }
  const timerApi = {
    setTimeout(callback, delay, ...args) { return setTimer(callback, delay, args, false); },
    setInterval(callback, delay, ...args) { return setTimer(callback, delay, args, true); },
    clearTimeout(id) { clearTimer(id); },
    clearInterval(id) { clearTimer(id); },
  };
  for (const key of ObjectKeys(timerApi)) {
    ObjectDefineProperty(global, key, { value: timerApi[key], writable: true, configurable: true });
  }

  // -- structuredClone: Node has it, QuickJS does not. Plain data, Date, RegExp, Map, Set,
  // ArrayBuffers and typed arrays, errors; cycles and shared references kept; functions
  // and symbols refused with Node's DataCloneError wording.
  function cloneError(value) {
    const error = new Error(`${String(value)} could not be cloned.`);
    error.name = "DataCloneError";
    return error;
  }
  function structuredClone(value) {
    const seen = new Map();
    function clone(v) {
      if (typeof v === "function" || typeof v === "symbol") throw cloneError(v);
      if (v === null || typeof v !== "object") return v;
      if (seen.has(v)) return seen.get(v);
      let out;
      if (Array.isArray(v)) {
        out = [];
        seen.set(v, out);
        for (let i = 0; i < v.length; i++) out[i] = clone(v[i]);
        return out;
      }
      if (v instanceof Date) out = new Date(v.getTime());
      else if (v instanceof RegExp) out = new RegExp(v.source, v.flags);
      else if (v instanceof ArrayBuffer) out = v.slice(0);
      else if (ArrayBuffer.isView(v)) out = new v.constructor(v);
      else if (v instanceof Map) {
        out = new Map();
        seen.set(v, out);
        v.forEach((item, key) => out.set(clone(key), clone(item)));
        return out;
      } else if (v instanceof Set) {
        out = new Set();
        seen.set(v, out);
        v.forEach((item) => out.add(clone(item)));
        return out;
      } else if (v instanceof Error) {
        out = new Error(v.message);
        out.name = v.name;
      } else {
        out = {};
        seen.set(v, out);
        const keys = ObjectKeys(v);
        for (let i = 0; i < keys.length; i++) out[keys[i]] = clone(v[keys[i]]);
        return out;
      }
      seen.set(v, out);
      return out;
    }
    return clone(value);
  }
  ObjectDefineProperty(global, "structuredClone", {
    value: structuredClone,
    writable: true,
    configurable: true,
  });

  // -- host -------------------------------------------------------------------------
  // The reply is built from parts and joined: quickjs-ng returns concatenations as rope
  // strings, which the Python binding cannot convert. It is the poll JSON, then each
  // call's arguments JSON after a U+0001: JSON text never holds a raw control character
  // (JSON.stringify escapes them all), so the host splits on it, and a 1 MB argument is
  // neither escaped here nor unescaped there. (Not NUL: the binding's conversion ends a
  // string at its first NUL.)
  function poll() {
    const out = list();
    const args = list();
    push(out, '{"logs":[');
    for (let i = 0; i < logs.length; i++) push(out, (i ? "," : "") + JSONStringify(logs[i]));
    logs.length = 0;
    push(out, '],"calls":[');
    for (let i = 0; i < outbox.length; i++) {
      const call = outbox[i];
      push(out, `${i ? "," : ""}[${call[0]},${call[1]}]`);
      push(args, "\u0001");
      push(args, call[2]);
    }
    outbox.length = 0;
    push(out, '],"state":');
    if (state === null) {
      push(out, "null");
    } else {
      push(out, `[${JSONStringify(state[0])},`);
      push(out, state[1] === null ? "null" : JSONStringify(state[1]));
      push(out, state.length > 2 ? `,${JSONStringify(state[2])}]` : "]");
    }
    push(out, `,"timer":${timerDelay()},"outstanding":${outstanding}}`);
    for (let i = 0; i < args.length; i++) push(out, args[i]);
    return ArrayJoin(out, "");
  }

  function makePrimordials() {
    const P = ObjectCreate(null);
    const NumberValueOf = uncurry(Number.prototype.valueOf), StringValueOf = uncurry(String.prototype.valueOf);
    const BooleanValueOf = uncurry(Boolean.prototype.valueOf), BigIntValueOf = uncurry(BigInt.prototype.valueOf);
    const SymbolValueOf = uncurry(Symbol.prototype.valueOf), MapGetSize = getter(Map.prototype, "size");
    const SetGetSize = getter(Set.prototype, "size");
    const entries = {
      ArrayIsArray, ObjectGetPrototypeOf, ObjectGetOwnPropertyDescriptor, ObjectKeys,
      ObjectGetOwnPropertySymbols, ObjectIs, hasOwn: ObjectHasOwn,
      isEnumerable: uncurry(Object.prototype.propertyIsEnumerable),
      objectToString: uncurry(Object.prototype.toString),
      functionToString: uncurry(Function.prototype.toString),
      StringSlice: uncurry(String.prototype.slice), StringIncludes: uncurry(String.prototype.includes),
      StringIndexOf: uncurry(String.prototype.indexOf), StringCharCodeAt: uncurry(String.prototype.charCodeAt),
      StringRepeat, StringPadStart: uncurry(String.prototype.padStart),
      StringPadEnd: uncurry(String.prototype.padEnd), StringStartsWith: uncurry(String.prototype.startsWith),
      StringEndsWith: uncurry(String.prototype.endsWith), NumberToString: uncurry(Number.prototype.toString),
      RegExpTest: (re, s) => RegExpExec(re, s) !== null, RegExpToString: uncurry(RegExp.prototype.toString),
      DateGetTime: uncurry(Date.prototype.getTime), DateToISOString: uncurry(Date.prototype.toISOString),
      DateToString: uncurry(Date.prototype.toString), SymbolToString: uncurry(Symbol.prototype.toString),
      MathMin: Math.min, MathMax: Math.max, MathSqrt: Math.sqrt, MathRound: Math.round, MathFloor: Math.floor,
      isError: isErrorValue, isMap: brand(MapGetSize), isSet: brand(SetGetSize), mapSize: MapGetSize,
      setSize: SetGetSize, mapEntries: uncurry(Map.prototype.entries), setValues: uncurry(Set.prototype.values),
      mapIteratorNext: uncurry(ObjectGetPrototypeOf(new OrigMap().entries()).next),
      setIteratorNext: uncurry(ObjectGetPrototypeOf(new OrigSet().values()).next),
      isWeakMap: brand((v) => WeakMapHas(v, ObjectPrototype)), isWeakSet: brand((v) => WeakSetHas(v, ObjectPrototype)),
      typedArrayTag: getter(TypedArrayPrototype, Symbol.toStringTag), typedArrayLength: getter(TypedArrayPrototype, "length"),
      arrayBufferByteLength: maybe(getter(ArrayBuffer.prototype, "byteLength")),
      isPromise: (v) => isPrototypeOf(OrigPromise.prototype, v),
      isAsyncFunction: (v) => { const p = ObjectGetPrototypeOf(v); return p === AsyncFunctionPrototype || p === AsyncGeneratorFunctionPrototype; },
      isGeneratorFunction: (v) => { const p = ObjectGetPrototypeOf(v); return p === GeneratorFunctionPrototype || p === AsyncGeneratorFunctionPrototype; },
      isRegExp: brand(getter(RegExp.prototype, "source")), isDate: brand(uncurry(Date.prototype.getTime)),
      newMap: () => new OrigMap(), mapGet: uncurry(Map.prototype.get), mapSet: uncurry(Map.prototype.set),
      mapGetSize: MapGetSize, SymbolIterator: Symbol.iterator, SymbolToStringTag: Symbol.toStringTag,
      Uint8Array, RangeError: OrigRangeError,
      numberValueOf: maybe(NumberValueOf), stringValueOf: maybe(StringValueOf),
      booleanValueOf: maybe(BooleanValueOf), bigintValueOf: maybe(BigIntValueOf), symbolValueOf: maybe(SymbolValueOf),
    };
    for (const key of ObjectKeys(entries)) P[key] = entries[key];
    return P;
  }

  // Memory that runs out inside the engine's own machinery (a job it cannot enqueue)
  // reaches no catch and no guard; what shows is a heap at its ceiling. The driver polls
  // FLAGS every few hundred jobs and after each slice, and a failed probe counts as
  // running out (a program within PROBE_BYTES of its limit has run out, in effect).
  // 64 KiB: an ArrayBuffer is zero-filled, and 256 KiB (above glibc's mmap threshold: a
  // map, a fill and an unmap per probe) was ~10 us of every slice, a sixth of a sub-call.
  const PROBE_BYTES = 64 * 1024;
  function probe() {
    // The captured constructor: a program may replace the global one, whose code would
    // then run inside every poll (and could keep the probe from ever failing).
    try { new OrigArrayBuffer(PROBE_BYTES); } catch { flags |= OOM; }
    return flags;
  }

  const HOST = [
    () => probe(),                                  // 0 FLAGS
    (bindingsJson) => { install(bindingsJson); },   // 1 INSTALL
    (source, lines, guardName) => { run(source, lines, guardName); },  // 2 RUN
    (id, ok, payload, code) => settle(id, ok, payload, code),  // 3 SETTLE
    // 4 POLL: the probe first; a flagged run answers "!<flags>" (nothing built under a
    // memory shortage) unless forced, so a slice ends with one call instead of two.
    (force) => { const f = probe(); return f && !force ? "!" + f : poll(); },
    () => fireTimer(),                              // 5 FIRE_TIMER
    () => forbidden,                                // 6 FORBIDDEN_MESSAGE
  ];
  return function host(op, a, b, c, d) { return HOST[op](a, b, c, d); };
})
