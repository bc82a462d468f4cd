// A target for live memory reads of C++ globals. Usage: memory_cpp CONTROL_DIR
// Prints "ready"; each time CONTROL_DIR/round-N appears, audio::g_engine.voices += 1 and prints
// "round N done"; exits when CONTROL_DIR/quit appears.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace audio {
struct Base {
    int base_field = 11;
    double gain = 0.5;
};

struct Engine : Base {
    int voices = 8;
    Engine *self = nullptr;
    static int instances;
};

int Engine::instances = 3;
Engine g_engine;
Engine *g_engine_ptr = &g_engine;
}  // namespace audio

static bool exists(const std::string &path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0;
}

int main(int argc, char **argv) {
    std::string control = argc > 1 ? argv[1] : ".";
    audio::g_engine.self = &audio::g_engine;
    std::printf("ready\n");
    std::fflush(stdout);
    for (int round = 1;; round++) {
        while (!exists(control + "/round-" + std::to_string(round))) {
            if (exists(control + "/quit")) return 0;
            usleep(5000);
        }
        audio::g_engine.voices += 1;
        std::printf("round %d done\n", round);
        std::fflush(stdout);
    }
}
