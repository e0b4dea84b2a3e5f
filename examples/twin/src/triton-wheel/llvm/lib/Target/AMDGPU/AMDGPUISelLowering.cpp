// AMDGPUISelLowering.cpp (twin LLVM)
#include "AMDGPUISelLowering.h"
SDValue AMDGPUTargetLowering::LowerOperation(SDValue Op, SelectionDAG &DAG) const { return Op; }
