//===- JsonSyntax.h - Whether a text is JSON, without parsing it ---*- C++
//-*-===//
//
// Lethe's JSON outputs are checked before they are handed out (a bare `inf`
// or `nan` printed for a number is not JSON). The check builds nothing:
// parsing the text into an llvm::json::Value and freeing it again was ~4%
// of a whole `lethe plan --json` at 100k ops (a 10 MB document).
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_SUPPORT_JSONSYNTAX_H
#define LETHE_SUPPORT_JSONSYNTAX_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace lethe {

/// Success when `text` is one JSON value (RFC 8259) with optional white
/// space around it, valid UTF-8; else an error naming the byte offset.
llvm::Error checkJsonSyntax(llvm::StringRef text);

} // namespace lethe

#endif // LETHE_SUPPORT_JSONSYNTAX_H
