// Core.cpp (twin LLVM): host code, built without the base image.
#include "llvm/IR/Module.h"
void LLVMDisposeModule(LLVMModuleRef M) { delete unwrap(M); }
