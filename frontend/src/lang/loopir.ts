/**
 * Highlighting for the loop IR printer (TensorIR-like): buffers, nested `for` loops with their
 * kind (serial, vectorized, unrolled, parallel), loads, stores and expressions.
 */
import { StreamLanguage, type StreamParser } from "@codemirror/language";

const KEYWORDS = new Set([
  "for", "in", "range", "if", "else", "then", "let", "def", "kernel", "buffer", "alloc", "allocate",
  "return", "store", "load", "block", "with", "while", "func", "param", "params",
]);
const LOOP_KINDS = new Set(["serial", "vectorized", "vectorize", "unrolled", "unroll", "parallel", "reduce", "spatial"]);
const BUILTINS = new Set(["max", "min", "exp", "log", "sqrt", "tanh", "abs", "select", "fma", "cast", "floor", "ceil", "erf", "sigmoid", "pow"]);
const DTYPE = /^(?:f16|bf16|f32|f64|i1|i8|i16|i32|i64|u8|u32|u64|bool|float\d*|int\d+|uint\d+)\b/;

export const loopIrParser: StreamParser<null> = {
  name: "prism-loop-ir",
  startState: () => null,
  token(stream) {
    if (stream.eatSpace()) return null;
    if (stream.match("//") || stream.match("#")) {
      stream.skipToEnd();
      return "comment";
    }
    if (stream.match(/^"(?:[^"\\]|\\.)*"?/)) return "string";
    if (stream.match(/^-?(?:0x[\da-f]+|\d+(?:\.\d*)?(?:e[+-]?\d+)?)/i)) return "number";
    if (stream.match(/^[%@][\w.$"-]+/)) return "variableName";
    if (stream.match(DTYPE)) return "typeName";
    const word = stream.match(/^[A-Za-z_]\w*/) as RegExpMatchArray | null;
    if (word) {
      const w = word[0];
      if (KEYWORDS.has(w)) return "keyword";
      if (LOOP_KINDS.has(w)) return "modifier";
      if (BUILTINS.has(w)) return "variableName.standard";
      if (stream.match(/^\s*\[/, false)) return "variableName.special";
      if (stream.match(/^\s*\(/, false)) return "variableName.function";
      return "name";
    }
    if (stream.match(/^(?:\+=|-=|\*=|==|!=|<=|>=|->|[-+*/%<>=!&|^])/)) return "operator";
    if (stream.match(/^[{}()[\],:;]/)) return "punctuation";
    stream.next();
    return null;
  },
};

export const loopIr = StreamLanguage.define(loopIrParser);
