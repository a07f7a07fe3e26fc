/* Reset handler and vector table for running a kiln package on a Cortex-M board without an OS (QEMU's
 * MPS2 boards, or a real part whose linker script gives the same symbols). kiln ships this file in every
 * bare-metal package and links it into the runners of `kiln run` and `kiln conformance`; firmware of
 * one's own usually has its vendor's startup code instead and needs none of this.
 *
 * What it does, in the order a Cortex-M needs it:
 *   - the vector table: the initial stack pointer and the reset handler (the core loads both at reset);
 *   - turn the FPU on (CP10/CP11 full access): a hard-float package faults on its first float
 *     instruction otherwise;
 *   - copy .data from flash to SRAM, zero .bss (the linker script names the bounds);
 *   - start SysTick on the core clock, counting its wraps, so kiln_cortex_m_ticks() reads a 64-bit
 *     clock (core cycles on a real part; on QEMU with -icount, time that advances per instruction);
 *   - open the semihosting console (newlib's rdimon), read the command line the host passed
 *     (SYS_GET_CMDLINE), call main(argc, argv) and exit with its status (SYS_EXIT).
 * It also gives harnesses a stack high-water mark: kiln_cortex_m_stack_paint() fills the free stack
 * below the caller with a pattern, kiln_cortex_m_stack_used() reports how deep anything wrote since.
 * A fault prints its name over semihosting and exits with status 3, so a broken program ends a QEMU run
 * instead of locking the core up. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern uint32_t __kiln_stack_top[], __kiln_data_load[], __kiln_data_start[], __kiln_data_end[], __bss_start__[],
    __bss_end__[];
extern int main(int argc, char** argv);
extern void initialise_monitor_handles(void);

void kiln_reset_handler(void);
uint64_t kiln_cortex_m_ticks(void);
void kiln_cortex_m_stack_paint(void);
uint32_t kiln_cortex_m_stack_used(void);
extern void __libc_init_array(void);

/* newlib's init and fini arrays call these; -nostartfiles leaves out the crti.o that has them. */
void _init(void) {}
void _fini(void) {}

static void fault(const char* what) {
  fprintf(stderr, "kiln firmware: %s\n", what);
  _Exit(3);
}
static void nmi_handler(void) { fault("NMI"); }
static void hard_fault_handler(void) { fault("hard fault"); }
static void mem_manage_handler(void) { fault("memory management fault"); }
static void bus_fault_handler(void) { fault("bus fault"); }
static void usage_fault_handler(void) { fault("usage fault"); }
static void unexpected_handler(void) { fault("unexpected exception"); }

/* SysTick: a 24-bit down-counter on the core clock; the handler counts its wraps. */
#define SYST_CSR (*(volatile uint32_t*)0xE000E010u)
#define SYST_RVR (*(volatile uint32_t*)0xE000E014u)
#define SYST_CVR (*(volatile uint32_t*)0xE000E018u)
static volatile uint32_t systick_wraps;
static void systick_handler(void) { systick_wraps = systick_wraps + 1; }

uint64_t kiln_cortex_m_ticks(void) {
  uint32_t wraps, count;
  do { /* a wrap between the two reads shows as a changed wrap count: read again */
    wraps = systick_wraps;
    count = SYST_CVR;
  } while (wraps != systick_wraps);
  return ((uint64_t)wraps << 24) + (0xFFFFFFu - count);
}

__attribute__((section(".kiln_vectors"), used)) void (*const kiln_vectors[16])(void) = {
    (void (*)(void))__kiln_stack_top, kiln_reset_handler, nmi_handler, hard_fault_handler, mem_manage_handler,
    bus_fault_handler, usage_fault_handler, unexpected_handler, unexpected_handler, unexpected_handler,
    unexpected_handler, unexpected_handler, unexpected_handler, unexpected_handler, unexpected_handler,
    systick_handler};

/* The stack high-water mark. The painted region ends a margin below the painter's frame, so the
 * caller's frame and the call itself are not counted; it stops at the heap's end (newlib's sbrk). */
enum { kStackPattern = 0xC5, kPaintMargin = 64, kMaxPaint = 256 * 1024 };
extern void* _sbrk(ptrdiff_t increment);
static uintptr_t paint_low, paint_high;

__attribute__((noinline)) void kiln_cortex_m_stack_paint(void) {
  uintptr_t sp;
  __asm__ volatile("mov %0, sp" : "=r"(sp));
  const uintptr_t high = sp - kPaintMargin, heap_end = (uintptr_t)_sbrk(0) + 16;
  const uintptr_t low = high > heap_end + kMaxPaint ? high - kMaxPaint : heap_end;
  for (uintptr_t a = low; a < high; ++a) *(volatile uint8_t*)a = kStackPattern;
  paint_low = low;
  paint_high = high;
}

uint32_t kiln_cortex_m_stack_used(void) {
  uintptr_t a = paint_low;
  while (a < paint_high && *(volatile const uint8_t*)a == kStackPattern) ++a;
  /* Bytes written below the painter's frame, plus the margin between that frame and the region. */
  return a == paint_high ? 0u : (uint32_t)(paint_high - a) + kPaintMargin;
}

/* One semihosting call: operation in r0, its parameter block in r1, the result back in r0. */
static int semihost(int op, void* block) {
  register int r0 __asm__("r0") = op;
  register void* r1 __asm__("r1") = block;
  __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
  return r0;
}

enum { kSysGetCmdline = 0x15, kMaxArgs = 64 };
static char cmdline[4096];
static char* argv_words[kMaxArgs + 1];

/* The host's command line, split at spaces (kiln passes paths without spaces). */
static int read_arguments(void) {
  struct {
    char* buffer;
    int length;
  } block = {cmdline, (int)sizeof cmdline - 1};
  if (semihost(kSysGetCmdline, &block) != 0) return 0;
  cmdline[block.length] = '\0';
  int argc = 0;
  for (char* p = cmdline; *p && argc < kMaxArgs;) {
    while (*p == ' ') *p++ = '\0';
    if (!*p) break;
    argv_words[argc++] = p;
    while (*p && *p != ' ') ++p;
  }
  argv_words[argc] = 0;
  return argc;
}

void kiln_reset_handler(void) {
#if defined(__ARM_FP)
  volatile uint32_t* cpacr = (volatile uint32_t*)0xE000ED88u;
  *cpacr |= 0xFu << 20;
  __asm__ volatile("dsb\n\tisb" ::: "memory");
#endif
  memcpy(__kiln_data_start, __kiln_data_load, (size_t)((char*)__kiln_data_end - (char*)__kiln_data_start));
  memset(__bss_start__, 0, (size_t)((char*)__bss_end__ - (char*)__bss_start__));
  SYST_RVR = 0xFFFFFFu;
  SYST_CVR = 0;
  SYST_CSR = 7u; /* core clock, interrupt on wrap, enabled */
  __libc_init_array();
  initialise_monitor_handles();
  int argc = read_arguments();
  exit(main(argc, argv_words));
}
