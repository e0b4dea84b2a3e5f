// SIInstrInfo.cpp (twin LLVM)
#include "SIInstrInfo.h"
bool SIInstrInfo::isLegalVSrcOperand() const { return true; }
