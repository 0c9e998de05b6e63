// An uncaught C++ exception: abort <- verbose_terminate_handler <- std::terminate
// <- __cxa_throw <- svc::parse_header(int) <- svc::handle_request(int) <- main.
#include <stdexcept>

volatile int sink;

namespace svc {
__attribute__((noinline)) void parse_header(int x) {
    if (x > 0) throw std::runtime_error("bad header");
    sink++;
}
__attribute__((noinline)) void handle_request(int x) {
    parse_header(x);
    sink++;
}
}  // namespace svc

int main(int argc, char **) {
    svc::handle_request(argc);
    return 0;
}
