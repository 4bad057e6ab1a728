/** Highlighting for textual LLVM IR (LLVM Language Reference Manual) and for assembly. */
import { StreamLanguage, type StreamParser } from "@codemirror/language";
import { gas } from "@codemirror/legacy-modes/mode/gas";

const KEYWORDS = new Set(
  ("define declare global constant private internal external linkonce weak common dso_local dso_preemptable " +
    "unnamed_addr local_unnamed_addr align noalias nocapture nonnull readonly writeonly readnone nounwind " +
    "nsw nuw exact fast nnan ninf nsz arcp contract afn reassoc inbounds volatile atomic tail musttail notail " +
    "attributes source_filename target datalayout triple to x zeroinitializer undef poison null true false " +
    "section comdat personality cleanup catch filter metadata").split(" "),
);
const INSTRUCTIONS = new Set(
  ("ret br switch indirectbr invoke resume unreachable fneg add fadd sub fsub mul fmul udiv sdiv fdiv urem srem frem " +
    "shl lshr ashr and or xor extractelement insertelement shufflevector extractvalue insertvalue alloca load store " +
    "fence cmpxchg atomicrmw getelementptr trunc zext sext fptrunc fpext fptoui fptosi uitofp sitofp ptrtoint inttoptr " +
    "bitcast addrspacecast icmp fcmp phi select call freeze va_arg landingpad " +
    "eq ne ugt uge ult ule sgt sge slt sle oeq ogt oge olt ole one ord ueq une uno").split(" "),
);

export const llvmIrParser: StreamParser<null> = {
  name: "llvm-ir",
  startState: () => null,
  token(stream) {
    if (stream.eatSpace()) return null;
    if (stream.match(";")) {
      stream.skipToEnd();
      return "comment";
    }
    if (stream.match(/^c?"(?:[^"\\]|\\.)*"?/)) return "string";
    if (stream.match(/^%(?:[-\w.$]+|"(?:[^"\\]|\\.)*")/)) return "variableName";
    if (stream.match(/^@(?:[-\w.$]+|"(?:[^"\\]|\\.)*")/)) return "variableName.definition";
    if (stream.match(/^![\w.]*/)) return "meta";
    if (stream.match(/^#\d+/)) return "meta";
    if (stream.match(/^(?:i\d+|half|bfloat|float|double|fp128|x86_fp80|void|ptr|label|token|metadata)\b/)) return "typeName";
    if (stream.match(/^-?(?:0x[\da-fA-F]+|\d+(?:\.\d*)?(?:e[+-]?\d+)?)/)) return "number";
    if (stream.sol() && stream.match(/^[-\w.$]+:/)) return "labelName";
    const word = stream.match(/^[A-Za-z_][\w.]*/) as RegExpMatchArray | null;
    if (word) {
      if (INSTRUCTIONS.has(word[0])) return "keyword";
      if (KEYWORDS.has(word[0])) return "modifier";
      return "name";
    }
    if (stream.match(/^[{}()[\]<>,=*]/)) return "punctuation";
    stream.next();
    return null;
  },
};

export const llvmIr = StreamLanguage.define(llvmIrParser);
export const asm = StreamLanguage.define(gas);
