/**
 * Highlighting for Prism's printed graph IR (MLIR-like, one node a line):
 *   %conv1 = Conv(%data, %w, %b) {kernel_shape = [7, 7], strides = [2, 2]} : f32[1, 64, 112, 112]
 */
import { StreamLanguage, type StreamParser } from "@codemirror/language";

interface IrState {
  inAttrs: number;
  afterColon: boolean;
}

const KEYWORDS = new Set(["graph", "func", "return", "group", "kernel", "input", "output", "const", "fused", "yield"]);
const DTYPE = /^(?:f16|bf16|f32|f64|i1|i4|i8|i16|i32|i64|u8|u16|u32|u64|bool|str|complex64|complex128|float\d*|int\d+|uint\d+)\b/;

export const graphIrParser: StreamParser<IrState> = {
  name: "prism-graph-ir",
  startState: () => ({ inAttrs: 0, afterColon: false }),
  token(stream, state) {
    if (stream.sol()) state.afterColon = false;
    if (stream.eatSpace()) return null;
    if (stream.match("//") || stream.match("#")) {
      stream.skipToEnd();
      return "comment";
    }
    if (stream.match(/^%"(?:[^"\\]|\\.)*"/) || stream.match(/^%[^\s,=(){}\[\]:]+/)) return "variableName";
    if (stream.match(/^@[\w.$-]+/)) return "variableName.special";
    if (stream.match(/^"(?:[^"\\]|\\.)*"?/)) return "string";
    if (stream.match(/^-?\d+(?:\.\d*)?(?:e[+-]?\d+)?/i)) return "number";
    if (stream.match("{")) {
      state.inAttrs++;
      return "brace";
    }
    if (stream.match("}")) {
      state.inAttrs = Math.max(0, state.inAttrs - 1);
      return "brace";
    }
    if (stream.match(/^[()[\],]/)) return "punctuation";
    if (stream.match(":")) {
      if (state.inAttrs === 0) state.afterColon = true;
      return "punctuation";
    }
    if (stream.match(/^(?:->|=)/)) return "operator";
    if ((state.afterColon || stream.peek() !== undefined) && stream.match(DTYPE)) return "typeName";
    const word = stream.match(/^[A-Za-z_][\w.:-]*/) as RegExpMatchArray | null;
    if (word) {
      const w = word[0];
      if (state.inAttrs > 0) return stream.match(/^\s*=/, false) ? "propertyName" : "atom";
      if (KEYWORDS.has(w)) return "keyword";
      if (stream.match(/^\s*\(/, false)) return "variableName.function";
      if (w === "true" || w === "false") return "bool";
      return "name";
    }
    stream.next();
    return null;
  },
};

export const graphIr = StreamLanguage.define(graphIrParser);
