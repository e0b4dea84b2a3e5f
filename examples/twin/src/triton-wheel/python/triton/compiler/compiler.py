"""triton.compiler (twin): lowers TTIR -> TTGIR -> LLIR -> AMDGCN."""


def compile(src, target):
    return (src, target)
