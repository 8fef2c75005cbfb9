// A C++ program beside the installed engine: it instantiates what the CUDA kernels' C++
// objects may instantiate too (shared_ptr, std::function: weak symbols the linker merges
// by name), throws and catches, and calls the engine. The install must leave those weak
// symbols weak (tools/pkg/api_only.cmake), or this fails to link or to catch.
#include <cstdio>
#include <functional>
#include <memory>
#include <stdexcept>

#include "zinf/zinf.h"

int main()
{
	auto n = std::make_shared<int>(3);
	std::function<int()> get = [n] { return *n; };
	struct zinf_config *cfg = nullptr;

	if (zinf_config_create(&cfg) != 0)
		return 1;
	zinf_config_destroy(cfg);
	try {
		throw std::runtime_error("caught");
	} catch (const std::exception &e) {
		std::printf("%s %d %s\n", e.what(), get(), zinf_strerror(ZINF_EBUDGET));
	}
	return 0;
}
