/* A second translation unit: a file static and a function-local static sharing names with vars_main.c. */
static int sFileStatic = 8;

struct Engine; /* only declared in this file */
extern struct Engine gEngineStorage;
struct Engine *gEnginePtr = &gEngineStorage;

int other_file_value(void)
{
    static int calls = 100;
    return ++calls + sFileStatic;
}
