// A port of Node's util.inspect (lib/internal/util/inspect.js, Node 20) for the QuickJS
// guest's console, fixed to the options code-mode consoles print with (Node's console.log
// defaults, tuned for logs a model reads): depth 4,
// maxArrayLength 100, maxStringLength 10,000, breakLength 80, compact 3, no colours.
// Evaluated before any program code; its completion value is the factory below, which
// the prelude calls with primordials captured before user code could replace them.
// Not ported: showHidden, sorted, getters, numericSeparator, custom inspect hooks and
// proxy unwrapping (QuickJS cannot see through a Proxy; its traps run).
(function makeInspect(P, stackOf) {
  "use strict";
  const {
    ArrayIsArray, ObjectGetPrototypeOf, ObjectGetOwnPropertyDescriptor, ObjectKeys,
    ObjectGetOwnPropertySymbols, ObjectIs, hasOwn, isEnumerable, objectToString,
    functionToString, StringSlice, StringIncludes, StringIndexOf, StringCharCodeAt,
    StringRepeat, StringPadStart, StringPadEnd, StringStartsWith, StringEndsWith, NumberToString, RegExpTest, RegExpToString, DateGetTime,
    DateToISOString, DateToString, SymbolToString, MathMin, MathMax, MathSqrt, MathRound,
    MathFloor, isError, isMap, isSet, mapEntries, setValues, mapIteratorNext, setIteratorNext, mapSize,
    setSize, isWeakMap, isWeakSet, typedArrayTag, typedArrayLength, arrayBufferByteLength,
    isPromise, isAsyncFunction, isGeneratorFunction, isRegExp, isDate, newMap, mapGet,
    mapSet, mapGetSize, SymbolIterator, SymbolToStringTag, Uint8Array, RangeError,
    numberValueOf, stringValueOf, booleanValueOf, bigintValueOf, symbolValueOf,
  } = P;

  const DEPTH = 4, MAX_ARRAY = 100, MAX_STRING = 10000, BREAK = 80, COMPACT = 3;
  const kObjectType = 0, kArrayType = 1, kArrayExtrasType = 2;
  const keyStrRegExp = /^[a-zA-Z_][a-zA-Z_0-9]*$/;
  const numberRegExp = /^(0|[1-9][0-9]*)$/;
  const builtInObjects = ["Object", "Function", "Array", "Number", "Boolean", "String",
    "Symbol", "Date", "Promise", "RegExp", "Error", "Map", "Set", "WeakMap", "WeakSet",
    "ArrayBuffer", "DataView", "BigInt", "Math", "JSON", "Reflect", "Proxy"];

  const push = (list, item) => { list[list.length] = item; };
  const indexOf = (list, item) => {
    for (let i = 0; i < list.length; i++) if (list[i] === item) return i;
    return -1;
  };
  const removeAt = (list, index) => {
    for (let i = index; i < list.length - 1; i++) list[i] = list[i + 1];
    list.length -= 1;
  };
  const join = (list, sep) => {
    let out = "";
    for (let i = 0; i < list.length; i++) out += (i === 0 ? "" : sep) + list[i];
    return out;
  };
  const remainingText = (n) => `... ${n} more item${n > 1 ? "s" : ""}`;

  // -- strings ------------------------------------------------------------------------
  const meta = [];
  for (let i = 0; i < 0xa0; i++) {
    meta[i] = i < 0x20 || (i > 0x7e && i < 0xa0)
      ? "\\x" + StringPadStart(NumberToString(i, 16).toUpperCase(), 2, "0") : "";
  }
  meta[8] = "\\b"; meta[9] = "\\t"; meta[10] = "\\n"; meta[12] = "\\f"; meta[13] = "\\r";
  meta[39] = "\\'"; meta[92] = "\\\\";

  function strEscape(str) {
    let singleQuote = 39;
    if (StringIncludes(str, "'")) {
      if (!StringIncludes(str, '"')) singleQuote = -1;
      else if (!StringIncludes(str, "`") && !StringIncludes(str, "${")) singleQuote = -2;
    }
    let result = "", last = 0;
    for (let i = 0; i < str.length; i++) {
      const point = StringCharCodeAt(str, i);
      if (point === singleQuote || point === 92 || point < 32 || (point > 126 && point < 160)) {
        result += StringSlice(str, last, i) + meta[point];
        last = i + 1;
      } else if (point >= 0xd800 && point <= 0xdfff) {
        if (point <= 0xdbff && i + 1 < str.length) {
          const next = StringCharCodeAt(str, i + 1);
          if (next >= 0xdc00 && next <= 0xdfff) { i++; continue; }
        }
        result += StringSlice(str, last, i) + "\\u" + NumberToString(point, 16);
        last = i + 1;
      }
    }
    if (last !== str.length) result += StringSlice(str, last);
    if (singleQuote === -1) return `"${result}"`;
    if (singleQuote === -2) return `\`${result}\``;
    return `'${result}'`;
  }

  function formatPrimitive(value, ctx) {
    switch (typeof value) {
      case "string": {
        let trailer = "";
        if (value.length > MAX_STRING) {
          const remaining = value.length - MAX_STRING;
          value = StringSlice(value, 0, MAX_STRING);
          trailer = `... ${remaining} more character${remaining > 1 ? "s" : ""}`;
        }
        if (value.length > 16 && value.length > BREAK - ctx.indentationLvl - 4) {
          const lines = [];
          let start = 0;  // split after each newline, keeping it
          for (let i = 0; i < value.length; i++) {
            if (StringCharCodeAt(value, i) === 10) { push(lines, StringSlice(value, start, i + 1)); start = i + 1; }
          }
          if (start < value.length || lines.length === 0) push(lines, StringSlice(value, start));
          const parts = [];
          for (let i = 0; i < lines.length; i++) push(parts, strEscape(lines[i]));
          return join(parts, ` +\n${StringRepeat(" ", ctx.indentationLvl + 2)}`) + trailer;
        }
        return strEscape(value) + trailer;
      }
      case "number": return ObjectIs(value, -0) ? "-0" : `${value}`;
      case "bigint": return `${value}n`;
      case "boolean": return `${value}`;
      case "undefined": return "undefined";
      default: return SymbolToString(value);
    }
  }

  // -- objects ------------------------------------------------------------------------
  function getConstructorName(obj) {
    let firstProto;
    const tmp = obj;
    while (obj) {
      const descriptor = ObjectGetOwnPropertyDescriptor(obj, "constructor");
      if (descriptor !== undefined && typeof descriptor.value === "function" &&
          descriptor.value.name !== "" && isInstanceof(tmp, descriptor.value)) {
        return `${descriptor.value.name}`;
      }
      obj = ObjectGetPrototypeOf(obj);
      if (firstProto === undefined) firstProto = obj;
    }
    if (firstProto === null) return null;
    return "Object";
  }

  function isInstanceof(object, ctor) {
    try { return object instanceof ctor; } catch { return false; }
  }

  function getPrefix(constructor, tag, fallback, size = "") {
    if (constructor === null) {
      if (tag !== "" && fallback !== tag) return `[${fallback}${size}: null prototype] [${tag}] `;
      return `[${fallback}${size}: null prototype] `;
    }
    if (tag !== "" && constructor !== tag) return `${constructor}${size} [${tag}] `;
    return `${constructor}${size} `;
  }

  function getKeys(value) {
    const keys = ObjectKeys(value);
    const symbols = ObjectGetOwnPropertySymbols(value);
    for (let i = 0; i < symbols.length; i++) {
      if (isEnumerable(value, symbols[i])) push(keys, symbols[i]);
    }
    return keys;
  }

  function formatValue(ctx, value, recurseTimes) {
    if (typeof value !== "object" && typeof value !== "function") return formatPrimitive(value, ctx);
    if (value === null) return "null";
    for (let i = 0; i < ctx.seen.length; i++) {
      if (ctx.seen[i] !== value) continue;
      let index = 1;
      if (ctx.circular === undefined) {
        ctx.circular = newMap();
        mapSet(ctx.circular, value, index);
      } else {
        index = mapGet(ctx.circular, value);
        if (index === undefined) {
          index = mapGetSize(ctx.circular) + 1;
          mapSet(ctx.circular, value, index);
        }
      }
      return `[Circular *${index}]`;
    }
    return formatRaw(ctx, value, recurseTimes);
  }

  function formatRaw(ctx, value, recurseTimes) {
    let keys;
    const constructor = getConstructorName(value);
    let tag = value[SymbolToStringTag];
    if (typeof tag !== "string" || (tag !== "" && isEnumerable(value, SymbolToStringTag))) tag = "";
    let base = "";
    let formatter = () => [];
    let braces;
    let noIterator = true;
    let extrasType = kObjectType;

    if (SymbolIterator in value || constructor === null) {
      noIterator = false;
      if (ArrayIsArray(value)) {
        const prefix = (constructor !== "Array" || tag !== "")
          ? getPrefix(constructor, tag, "Array", `(${value.length})`) : "";
        keys = [];
        const all = ObjectKeys(value);
        for (let i = 0; i < all.length; i++) if (!RegExpTest(numberRegExp, all[i])) push(keys, all[i]);
        braces = [`${prefix}[`, "]"];
        if (value.length === 0 && keys.length === 0) return `${braces[0]}]`;
        extrasType = kArrayExtrasType;
        formatter = formatArray;
      } else if (isSet(value)) {
        const size = setSize(value);
        const prefix = getPrefix(constructor, tag, "Set", `(${size})`);
        keys = getKeys(value);
        formatter = formatSet;
        if (size === 0 && keys.length === 0) return `${prefix}{}`;
        braces = [`${prefix}{`, "}"];
      } else if (isMap(value)) {
        const size = mapSize(value);
        const prefix = getPrefix(constructor, tag, "Map", `(${size})`);
        keys = getKeys(value);
        formatter = formatMap;
        if (size === 0 && keys.length === 0) return `${prefix}{}`;
        braces = [`${prefix}{`, "}"];
      } else if (typedArrayTag(value) !== undefined) {
        keys = [];
        const all = ObjectKeys(value);
        for (let i = 0; i < all.length; i++) if (!RegExpTest(numberRegExp, all[i])) push(keys, all[i]);
        const size = typedArrayLength(value);
        const prefix = getPrefix(constructor, tag, typedArrayTag(value), `(${size})`);
        braces = [`${prefix}[`, "]"];
        if (size === 0 && keys.length === 0) return `${braces[0]}]`;
        formatter = formatTypedArray;
        extrasType = kArrayExtrasType;
      } else {
        noIterator = true;
      }
    }
    if (noIterator) {
      keys = getKeys(value);
      braces = ["{", "}"];
      if (typeof value === "function") {
        base = getFunctionBase(value, constructor, tag);
        if (keys.length === 0) return base;
      } else if (constructor === "Object") {
        if (objectToString(value) === "[object Arguments]") braces[0] = "[Arguments] {";
        else if (tag !== "") braces[0] = `${getPrefix(constructor, tag, "Object")}{`;
        if (keys.length === 0) return `${braces[0]}}`;
      } else if (isRegExp(value)) {
        base = RegExpToString(value);
        const prefix = getPrefix(constructor, tag, "RegExp");
        if (prefix !== "RegExp ") base = `${prefix}${base}`;
        if (keys.length === 0 || recurseTimes > DEPTH) return base;
      } else if (isDate(value)) {
        base = DateGetTime(value) !== DateGetTime(value) ? DateToString(value) : DateToISOString(value);
        const prefix = getPrefix(constructor, tag, "Date");
        if (prefix !== "Date ") base = `${prefix}${base}`;
        if (keys.length === 0) return base;
      } else if (isError(value)) {
        base = formatError(value, constructor, tag, ctx, keys);
        if (keys.length === 0) return base;
      } else if (arrayBufferByteLength(value) !== undefined) {
        const prefix = getPrefix(constructor, tag, "ArrayBuffer");
        formatter = formatArrayBuffer;
        braces[0] = `${prefix}{`;
        const withLength = ["byteLength"];
        for (let i = 0; i < keys.length; i++) push(withLength, keys[i]);
        keys = withLength;
      } else if (isPromise(value)) {
        // QuickJS cannot read a promise's state synchronously; most logged promises
        // are forgotten awaits, which Node shows as pending.
        braces[0] = `${getPrefix(constructor, tag, "Promise")}{`;
        formatter = () => ["<pending>"];
      } else if (isWeakSet(value)) {
        braces[0] = `${getPrefix(constructor, tag, "WeakSet")}{`;
        formatter = () => ["<items unknown>"];
      } else if (isWeakMap(value)) {
        braces[0] = `${getPrefix(constructor, tag, "WeakMap")}{`;
        formatter = () => ["<items unknown>"];
      } else if ((base = getBoxedBase(value, ctx, keys, constructor, tag)) !== "") {
        if (keys.length === 0) return base;
      } else {
        const style = constructor === null ? getPrefix(null, tag, "Object") : getPrefix(constructor, tag, "Object");
        if (keys.length === 0) return `${style}{}`;
        braces[0] = `${style}{`;
      }
    }

    if (recurseTimes > DEPTH) {
      let name = StringSlice(getPrefix(constructor, tag, "Object"), 0, -1);
      if (constructor !== null) name = `[${name}]`;
      return name;
    }
    recurseTimes += 1;
    push(ctx.seen, value);
    ctx.currentDepth = recurseTimes;
    let output;
    try {
      output = formatter(ctx, value, recurseTimes);
      for (let i = 0; i < keys.length; i++) {
        push(output, formatProperty(ctx, value, recurseTimes, keys[i], extrasType));
      }
    } catch (err) {
      if (!isInstanceof(err, RangeError)) throw err;
      ctx.seen.length -= 1;
      return `[${StringSlice(getPrefix(constructor, tag, "Object"), 0, -1)}: Inspection interrupted prematurely. Maximum call stack size exceeded.]`;
    }
    if (ctx.circular !== undefined) {
      const index = mapGet(ctx.circular, value);
      if (index !== undefined) base = base === "" ? `<ref *${index}>` : `<ref *${index}> ${base}`;
    }
    ctx.seen.length -= 1;
    return reduceToSingleString(ctx, output, base, braces, extrasType, recurseTimes, value);
  }

  function getFunctionBase(value, constructor, tag) {
    const source = functionToString(value);
    if (StringStartsWith(source, "class") && StringEndsWith(source, "}")) {
      const slice = StringSlice(source, 5, -1);
      const bracket = StringIndexOf(slice, "{");
      if (bracket !== -1 && !StringIncludes(StringSlice(slice, 0, bracket), "(")) {
        const name = (hasOwn(value, "name") && value.name) || "(anonymous)";
        let base = `class ${name}`;
        if (constructor !== "Function" && constructor !== null) base += ` [${constructor}]`;
        if (tag !== "" && constructor !== tag) base += ` [${tag}]`;
        if (constructor !== null) {
          const superName = ObjectGetPrototypeOf(value).name;
          if (superName) base += ` extends ${superName}`;
        } else {
          base += " extends [null prototype]";
        }
        return `[${base}]`;
      }
    }
    let type = "Function";
    if (isGeneratorFunction(value)) type = `Generator${type}`;
    if (isAsyncFunction(value)) type = `Async${type}`;
    let base = `[${type}`;
    if (constructor === null) base += " (null prototype)";
    base += value.name === "" ? " (anonymous)" : `: ${value.name}`;
    base += "]";
    if (constructor !== type && constructor !== null) base += ` ${constructor}`;
    if (tag !== "" && constructor !== tag) base += ` [${tag}]`;
    return base;
  }

  function formatError(err, constructor, tag, ctx, keys) {
    const name = err.name != null ? `${err.name}` : "Error";
    let stack = stackOf(err);
    const shown = ["name", "message", "stack"];
    for (let k = 0; k < shown.length; k++) {
      const index = indexOf(keys, shown[k]);
      if (index !== -1 && StringIncludes(stack, err[shown[k]])) removeAt(keys, index);
    }
    if ("cause" in err && indexOf(keys, "cause") === -1) push(keys, "cause");
    // Node's improveStack: make the header say the class when `name` hides it.
    if (constructor === null || (StringEndsWith(name, "Error") && StringStartsWith(stack, name) &&
        (stack.length === name.length || stack[name.length] === ":" || stack[name.length] === "\n"))) {
      const prefix = StringSlice(getPrefix(constructor, tag, "Error"), 0, -1);
      if (name !== prefix) {
        stack = StringIncludes(prefix, name)
          ? (name.length === 0 ? `${prefix}: ${stack}` : `${prefix}${StringSlice(stack, name.length)}`)
          : `${prefix} [${name}]${StringSlice(stack, name.length)}`;
      }
    }
    let pos = (err.message && StringIndexOf(stack, err.message)) || -1;
    if (pos !== -1) pos += err.message.length;
    if (StringIndexOf(stack, "\n    at", pos) === -1) stack = `[${stack}]`;
    if (ctx.indentationLvl !== 0) {
      // String.prototype.replaceAll looks up Symbol.replace on its argument; stay clear.
      const indentation = `\n${StringRepeat(" ", ctx.indentationLvl)}`;
      let out = "", last = 0, at;
      while ((at = StringIndexOf(stack, "\n", last)) !== -1) {
        out += StringSlice(stack, last, at) + indentation;
        last = at + 1;
      }
      stack = out + StringSlice(stack, last);
    }
    return stack;
  }

  function getBoxedBase(value, ctx, keys, constructor, tag) {
    let primitive, type;
    if ((primitive = numberValueOf(value)) !== undefined) type = "Number";
    else if ((primitive = stringValueOf(value)) !== undefined) {
      type = "String";
      // Boxed strings list their characters as keys; Node drops them.
      const chars = primitive.length;
      for (let i = 0; i < keys.length - chars; i++) keys[i] = keys[i + chars];
      keys.length = MathMax(0, keys.length - chars);
    } else if ((primitive = booleanValueOf(value)) !== undefined) type = "Boolean";
    else if ((primitive = bigintValueOf(value)) !== undefined) type = "BigInt";
    else if ((primitive = symbolValueOf(value)) !== undefined) type = "Symbol";
    else return "";
    let base = `[${type}`;
    if (type !== constructor) base += constructor === null ? " (null prototype)" : ` (${constructor})`;
    base += `: ${formatPrimitive(primitive, ctx)}]`;
    if (tag !== "" && tag !== constructor) base += ` [${tag}]`;
    return base;
  }

  function formatArray(ctx, value, recurseTimes) {
    const valLen = value.length;
    const len = MathMin(MAX_ARRAY, valLen);
    const output = [];
    for (let i = 0; i < len; i++) {
      if (!hasOwn(value, i)) return formatSpecialArray(ctx, value, recurseTimes, len, output, i);
      push(output, formatProperty(ctx, value, recurseTimes, i, kArrayType));
    }
    if (valLen - len > 0) push(output, remainingText(valLen - len));
    return output;
  }

  function formatSpecialArray(ctx, value, recurseTimes, maxLength, output, i) {
    const keys = ObjectKeys(value);
    let index = i;
    for (; i < keys.length && output.length < maxLength; i++) {
      const key = keys[i];
      const tmp = +key;
      if (tmp > 2 ** 32 - 2) break;
      if (`${index}` !== key) {
        if (!RegExpTest(numberRegExp, key)) break;
        const emptyItems = tmp - index;
        push(output, `<${emptyItems} empty item${emptyItems > 1 ? "s" : ""}>`);
        index = tmp;
        if (output.length === maxLength) break;
      }
      push(output, formatProperty(ctx, value, recurseTimes, key, kArrayType));
      index++;
    }
    const remaining = value.length - index;
    if (output.length !== maxLength) {
      if (remaining > 0) push(output, `<${remaining} empty item${remaining > 1 ? "s" : ""}>`);
    } else if (remaining > 0) {
      push(output, remainingText(remaining));
    }
    return output;
  }

  function formatTypedArray(ctx, value) {
    const length = typedArrayLength(value);
    const maxLength = MathMin(MAX_ARRAY, length);
    const output = [];
    for (let i = 0; i < maxLength; ++i) push(output, formatPrimitive(value[i], ctx));
    if (length > maxLength) push(output, remainingText(length - maxLength));
    return output;
  }

  function formatArrayBuffer(ctx, value) {
    const bytes = new Uint8Array(value);
    let hex = "";
    const shown = MathMin(MAX_ARRAY, bytes.length);
    for (let i = 0; i < shown; i++) hex += (i ? " " : "") + StringPadStart(NumberToString(bytes[i], 16), 2, "0");
    const remaining = bytes.length - MAX_ARRAY;
    if (remaining > 0) hex += ` ... ${remaining} more byte${remaining > 1 ? "s" : ""}`;
    return [`[Uint8Contents]: <${hex}>`];
  }

  function formatSet(ctx, value, recurseTimes) {
    const length = setSize(value);
    const maxLength = MathMin(MAX_ARRAY, length);
    const output = [];
    ctx.indentationLvl += 2;
    const it = setValues(value);
    for (let i = 0; i < maxLength; i++) {
      const step = setIteratorNext(it);
      if (step.done) break;
      push(output, formatValue(ctx, step.value, recurseTimes));
    }
    if (length > maxLength) push(output, remainingText(length - maxLength));
    ctx.indentationLvl -= 2;
    return output;
  }

  function formatMap(ctx, value, recurseTimes) {
    const length = mapSize(value);
    const maxLength = MathMin(MAX_ARRAY, length);
    const output = [];
    ctx.indentationLvl += 2;
    const it = mapEntries(value);
    for (let i = 0; i < maxLength; i++) {
      const step = mapIteratorNext(it);
      if (step.done) break;
      push(output, `${formatValue(ctx, step.value[0], recurseTimes)} => ${formatValue(ctx, step.value[1], recurseTimes)}`);
    }
    if (length > maxLength) push(output, remainingText(length - maxLength));
    ctx.indentationLvl -= 2;
    return output;
  }

  function formatProperty(ctx, value, recurseTimes, key, type) {
    let name, str;
    const desc = ObjectGetOwnPropertyDescriptor(value, key) || { value: value[key], enumerable: true };
    if (desc.value !== undefined) {
      ctx.indentationLvl += 2;
      str = formatValue(ctx, desc.value, recurseTimes);
      ctx.indentationLvl -= 2;
    } else if (desc.get !== undefined) {
      str = desc.set !== undefined ? "[Getter/Setter]" : "[Getter]";
    } else if (desc.set !== undefined) {
      str = "[Setter]";
    } else {
      str = "undefined";
    }
    if (type === kArrayType) return str;
    if (typeof key === "symbol") name = `[${SymbolToString(key)}]`;
    else if (key === "__proto__") name = "['__proto__']";
    else if (desc.enumerable === false) name = `[${key}]`;
    else if (RegExpTest(keyStrRegExp, key)) name = key;
    else name = strEscape(key);
    return `${name}: ${str}`;
  }

  function groupArrayElements(ctx, output, value) {
    let totalLength = 0, maxLength = 0, i = 0;
    let outputLength = output.length;
    if (MAX_ARRAY < output.length) outputLength--;  // leaves "... more items" alone
    const separatorSpace = 2;
    const dataLen = [];
    for (; i < outputLength; i++) {
      const len = output[i].length;
      dataLen[i] = len;
      totalLength += len + separatorSpace;
      if (maxLength < len) maxLength = len;
    }
    const actualMax = maxLength + separatorSpace;
    if (actualMax * 3 + ctx.indentationLvl < BREAK &&
        (totalLength / actualMax > 5 || maxLength <= 6)) {
      const averageBias = MathSqrt(actualMax - totalLength / output.length);
      const biasedMax = MathMax(actualMax - 3 - averageBias, 1);
      const columns = MathMin(
        MathRound(MathSqrt(2.5 * biasedMax * outputLength) / biasedMax),
        MathFloor((BREAK - ctx.indentationLvl) / actualMax),
        COMPACT * 4,
        15,
      );
      if (columns <= 1) return output;
      const tmp = [];
      const maxLineLength = [];
      for (let c = 0; c < columns; c++) {
        let lineLength = 0;
        for (let j = c; j < output.length; j += columns) if (dataLen[j] > lineLength) lineLength = dataLen[j];
        push(maxLineLength, lineLength + separatorSpace);
      }
      let order = StringPadStart;
      if (value !== undefined) {
        for (let k = 0; k < output.length; k++) {
          if (typeof value[k] !== "number" && typeof value[k] !== "bigint") { order = StringPadEnd; break; }
        }
      }
      for (let k = 0; k < outputLength; k += columns) {
        const max = MathMin(k + columns, outputLength);
        let str = "";
        let j = k;
        for (; j < max - 1; j++) str += order(`${output[j]}, `, maxLineLength[j - k], " ");
        str += order === StringPadStart
          ? StringPadStart(output[j], maxLineLength[j - k] - separatorSpace, " ") : output[j];
        push(tmp, str);
      }
      if (MAX_ARRAY < output.length) push(tmp, output[outputLength]);
      output = tmp;
    }
    return output;
  }

  function isBelowBreakLength(ctx, output, start, base) {
    let totalLength = output.length + start;
    if (totalLength + output.length > BREAK) return false;
    for (let i = 0; i < output.length; i++) {
      totalLength += output[i].length;
      if (totalLength > BREAK) return false;
    }
    return base === "" || !StringIncludes(base, "\n");
  }

  function reduceToSingleString(ctx, output, base, braces, extrasType, recurseTimes, value) {
    const entries = output.length;
    if (extrasType === kArrayExtrasType && entries > 6) output = groupArrayElements(ctx, output, value);
    if (ctx.currentDepth - recurseTimes < COMPACT && entries === output.length) {
      const start = output.length + ctx.indentationLvl + braces[0].length + base.length + 10;
      if (isBelowBreakLength(ctx, output, start, base)) {
        const joined = join(output, ", ");
        if (!StringIncludes(joined, "\n")) {
          return `${base ? `${base} ` : ""}${braces[0]} ${joined} ${braces[1]}`;
        }
      }
    }
    const indentation = `\n${StringRepeat(" ", ctx.indentationLvl)}`;
    return `${base ? `${base} ` : ""}${braces[0]}${indentation}  ${join(output, `,${indentation}  `)}${indentation}${braces[1]}`;
  }

  return function inspect(value) {
    const ctx = { indentationLvl: 0, seen: [], currentDepth: 0, circular: undefined };
    return formatValue(ctx, value, 0);
  };
})
