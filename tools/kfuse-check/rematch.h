/* rematch.h: the regex program shared by recomp.c (parsing and compiling
 * the canonical ERE) and rematch.c (running it).  Internal to kfuse-check. */
#ifndef KFC_REMATCH_H
#define KFC_REMATCH_H
#include "kfc.h"

enum { I_BYTE, I_SET, I_ANY, I_SPLIT, I_JMP, I_SAVE, I_BOL, I_EOL, I_WBEG, I_WEND, I_BREF, I_MARK, I_CHECK, I_MATCH };

struct kfc_inst {
	uint8_t op, c;
	int32_t x, y; /* jump targets (x preferred), a set, a slot, a group, a register */
};

static inline void kfc_bit_set(uint64_t *b, int c) { b[c >> 6] |= (uint64_t)1 << (c & 63); }
static inline bool kfc_bit_has(const uint64_t *b, int c) { return (b[c >> 6] >> (c & 63)) & 1; }

#endif
