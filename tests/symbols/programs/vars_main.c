/* Globals of every shape for the variable/type tests (tests/symbols/test_variables*.py).
   Initial values are asserted by decoding the bytes of .data: keep them in step with the tests. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

int gInt = -42;
unsigned int gUint = 4000000000u;
double gDouble = 3.5;
float gFloat = -0.25f;
bool gBool = true;
char gChar = 'x';
long long gWide = -1234567890123LL;
static int sFileStatic = 7;
const char *gName = "strobe";
char gLabel[16] = "hello";
int gInts[5] = {1, 2, 3, 4, 5};
int gGrid[2][3] = {{1, 2, 3}, {4, 5, 6}};
void *gOpaque = 0;
short gBig[150] = {1, 2, 3};
__thread int gTls = 5;

enum Color { RED, GREEN = 5, BLUE };
enum Color gColor = GREEN;
enum Color gOddColor = (enum Color)42;

struct Point {
    int x;
    int y;
};
struct Point gPoints[3] = {{1, 2}, {3, 4}, {5, 6}};

typedef struct {
    uint32_t size;
    uint32_t capacity;
    uint8_t *data;
    struct Point origin;
    enum Color color;
} MidiBuffer;
MidiBuffer gMidi = {128, 512, 0, {9, 10}, BLUE};
MidiBuffer *gMidiPtr = &gMidi;

union Word {
    int i;
    float f;
    unsigned char bytes[4];
};
union Word gWord = {.i = 0x01020304};

struct Flags {
    unsigned a : 3;
    signed b : 5;
    unsigned c : 1;
    unsigned d : 12;
    int after;
};
struct Flags gFlags = {5, -3, 1, 1000, 77};

/* A linked chain: gHead->next->next->next->value is 4 dereferences. */
struct Link {
    int value;
    struct Link *next;
};
struct Link gLink4 = {4, 0};
struct Link gLink3 = {3, &gLink4};
struct Link gLink2 = {2, &gLink3};
struct Link gLink1 = {1, &gLink2};
struct Link *gHead = &gLink1;

/* Mixed '.' and '->': gRoot.inner.link->next->value */
struct Inner {
    short tag;
    struct Link *link;
};
struct Outer {
    char kind;
    struct Inner inner;
    struct Inner *innerPtr;
};
struct Outer gRoot = {'o', {3, &gLink1}, 0};

struct Holder {
    const char *title;
    struct Outer outer;
};
struct Holder gHolder = {"held", {'h', {1, 0}, 0}};

/* Defined here; vars_other.c only declares it and points at gEngineStorage (an opaque pointer there). */
struct Engine {
    int rpm;
    const char *label;
};
struct Engine gEngineStorage = {7200, "v8"};

int bump_calls(void)
{
    static int calls = 3;
    return ++calls;
}

void reset_flags(struct Flags *flags, int value)
{
    flags->after = value;
}

int other_file_value(void);

int main(void)
{
    static long mainCount = 11;
    mainCount += bump_calls() + other_file_value() + sFileStatic + gTls + gBig[1];
    reset_flags(&gFlags, 78);
    printf("%ld %d %s\n", mainCount, gInt, gName);
    return 0;
}
