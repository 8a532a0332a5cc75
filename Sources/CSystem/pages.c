/* The pages of the loaded ELF objects that are never written (their code and read-only
 * data), handed back with MADV_DONTNEED: each such page is the file's, and the next use
 * faults it back from the page cache. Taken from the loader's own list (dl_iterate_phdr,
 * which holds its lock, so no object is added or removed meanwhile), segment by segment:
 * only PT_LOAD segments without PF_W, only the whole pages of their file part, never a
 * page of PT_GNU_RELRO (relocated, then made read-only: anonymous memory that
 * MADV_DONTNEED would throw away), never an object with text relocations, never the vDSO.
 * Reading /proc/self/smaps for this instead missed relocated pages swapped out (counted
 * under Swap, not Anonymous) and raced with a dlopen on another thread. */
#define _GNU_SOURCE
#include "csystem.h"

#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

struct sm_release { size_t released; uintptr_t page; uintptr_t vdso; };

static int sm_has_text_relocations(const struct dl_phdr_info *info) {
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_DYNAMIC) continue;
        for (const ElfW(Dyn) *d = (const ElfW(Dyn) *)(info->dlpi_addr + ph->p_vaddr); d->d_tag != DT_NULL; d++) {
            if (d->d_tag == DT_TEXTREL) return 1;
            if (d->d_tag == DT_FLAGS && (d->d_un.d_val & DF_TEXTREL)) return 1;
        }
    }
    return 0;
}

/* Releases the whole pages of [lo, hi) outside [keep_lo, keep_hi). */
static void sm_release_range(struct sm_release *st, uintptr_t lo, uintptr_t hi, uintptr_t keep_lo, uintptr_t keep_hi) {
    uintptr_t mask = st->page - 1;
    uintptr_t parts[2][2] = {{lo, hi < keep_lo ? hi : keep_lo}, {lo > keep_hi ? lo : keep_hi, hi}};
    if (keep_lo >= keep_hi) { parts[0][1] = hi; parts[1][0] = hi; }
    for (int k = 0; k < 2; k++) {
        uintptr_t a = (parts[k][0] + mask) & ~mask, b = parts[k][1] & ~mask;
        if (a < b && madvise((void *)a, b - a, MADV_DONTNEED) == 0) st->released += b - a;
    }
}

static int sm_release_object(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    struct sm_release *st = data;
    if (st->vdso && (uintptr_t)info->dlpi_phdr >= st->vdso && (uintptr_t)info->dlpi_phdr < st->vdso + 16 * st->page)
        return 0;
    if (sm_has_text_relocations(info)) return 0;
    uintptr_t relro_lo = 0, relro_hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_GNU_RELRO) {
            /* Widened to whole pages: what shares a page with it is kept too. */
            relro_lo = (info->dlpi_addr + ph->p_vaddr) & ~(st->page - 1);
            relro_hi = (info->dlpi_addr + ph->p_vaddr + ph->p_memsz + st->page - 1) & ~(st->page - 1);
        }
    }
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || (ph->p_flags & PF_W) || ph->p_filesz == 0) continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        sm_release_range(st, lo, lo + ph->p_filesz, relro_lo, relro_hi);
    }
    return 0;
}

size_t sm_release_file_pages(void) {
    struct sm_release st = { 0, (uintptr_t)sysconf(_SC_PAGESIZE), (uintptr_t)getauxval(AT_SYSINFO_EHDR) };
    if (st.page == 0 || (st.page & (st.page - 1))) return 0;
    dl_iterate_phdr(sm_release_object, &st);
    return st.released;
}
