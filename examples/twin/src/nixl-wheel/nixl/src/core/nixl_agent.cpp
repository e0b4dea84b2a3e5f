// nixl_agent.cpp (twin NIXL)
#include "nixl.h"
nixlAgent::nixlAgent(const std::string& name) : name_(name) {}
