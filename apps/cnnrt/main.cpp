#include <cstdio>

#include "cnnrt/cnnrt.hpp"

int main() { std::printf("cnnrt %s\n", cnnrt::version()); }
