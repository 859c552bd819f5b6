/* kiln_device_derive_arch(): the architecture name profiles match on, from
   what the driver reports: a compute capability, a gfx target name, POCL's
   host triple and LLVM CPU, or failing those a guess from the marketing name.
   kiln_device_refine_host_arch(): for the host's own CPU device, what CPUID
   says where the driver's LLVM is older than the CPU. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "backend/backend.h"

/* An architecture and the name tokens that identify it. In a token '#'
   stands for any digit and a final '$' for the end of a word; a token
   matches case-insensitively at the start of a word. The first row with a
   matching token wins, so more specific rows come first. */
#define ARCH_TOKENS 8

struct arch_guess {
    const char *arch;
    const char *tokens[ARCH_TOKENS]; /* NULL after the last, unless all are used */
};

static const struct arch_guess nvidia_guesses[] = {
    {"sm_90", {"H100", "H200", "H800", "GH200"}},
    {"sm_89", {"Ada$"}}, /* "RTX 4000 Ada Generation", before the Turing "Quadro RTX 4000" */
    {"sm_75", {"Quadro RTX", "TITAN RTX", "RTX 20", "GTX 16", "T4"}},
    {"sm_80", {"A100$", "A800$", "A30$"}}, /* whole words: "RTX A1000" and "RTX A3000" are GA10x */
    {"sm_89", {"RTX 40", "L40", "L4$"}},
    {"sm_86", {"RTX 30", "RTX A", "A10", "A40", "A2"}},
    {"sm_70", {"V100", "TITAN V$"}},
    {"sm_60", {"P100"}},
    {"sm_61", {"GTX 10", "TITAN X", "P40$", "P4$"}},
};

static const struct arch_guess amd_guesses[] = {
    {"gfx942", {"MI300"}},    {"gfx90a", {"MI200", "MI210", "MI250"}},
    {"gfx908", {"MI100"}},    {"gfx906", {"MI50$", "MI60$", "Radeon VII"}},
    {"gfx1100", {"RX 7###"}}, {"gfx1030", {"RX 6###"}},
    {"gfx1010", {"RX 5###"}}, /* four digits: the RX 580 is Polaris */
    {"gfx900", {"Vega"}},
};

static const struct arch_guess intel_guesses[] = {
    {"xe-hpg", {"Arc$", "DG2"}},
    {"xe-hpc", {"Data Center GPU Max"}},
    {"xe-lp", {"Iris(R) Xe", "UHD Graphics 7##", "Xe$"}},
    {"gen11", {"Iris(R) Plus Graphics G"}},
    {"gen9", {"UHD Graphics", "HD Graphics", "Iris"}},
};

static const struct arch_guess cpu_guesses[] = {
    {"aarch64:unknown", {"aarch64", "arm", "Neoverse", "Cortex", "Ampere", "Apple"}},
    {"x86_64:unknown", {"x86", "Intel", "AMD", "Xeon", "EPYC", "Ryzen", "GenuineIntel", "AuthenticAMD"}},
};

static int is_word_char(char c) { return isalnum((unsigned char)c) != 0; }

static int has_token(const char *text, const char *token)
{
    for (const char *s = text; *s; s++) {
        if (s > text && is_word_char(s[-1]))
            continue;
        const char *t = token, *c = s;
        for (; *t && *t != '$'; t++, c++)
            if (*t == '#' ? !isdigit((unsigned char)*c) : tolower((unsigned char)*t) != tolower((unsigned char)*c))
                break;
        if (*t == '\0' || (*t == '$' && !is_word_char(*c)))
            return 1;
    }
    return 0;
}

/* The first row matching `text`, else the first matching `fallback`. */
static void guess(struct kiln_device_desc *d, const struct arch_guess *rows, size_t count, const char *text,
                  const char *fallback)
{
    const char *texts[2] = {text, fallback};
    for (int i = 0; i < 2 && texts[i]; i++)
        for (size_t r = 0; r < count; r++)
            for (size_t t = 0; t < ARCH_TOKENS && rows[r].tokens[t]; t++)
                if (has_token(texts[i], rows[r].tokens[t])) {
                    snprintf(d->arch, sizeof d->arch, "%s", rows[r].arch);
                    return;
                }
}

#define GUESS(d, rows, text, fallback) guess(d, rows, sizeof rows / sizeof rows[0], text, fallback)

static int contains_ci(const char *text, const char *needle)
{
    for (; *text; text++) {
        size_t n = 0;
        while (needle[n] && tolower((unsigned char)text[n]) == tolower((unsigned char)needle[n]))
            n++;
        if (!needle[n])
            return 1;
    }
    return 0;
}

/* Whether the POCL device name shows `cpu` as "<cpu>..." or "<kind>-<cpu>...",
   followed by '-' or the end. */
static int name_shows_cpu(const char *name, const char *cpu)
{
    const char *dash = strchr(name, '-');
    const char *starts[2] = {name, dash ? dash + 1 : NULL};
    size_t n = strlen(cpu);
    for (int i = 0; i < 2; i++)
        if (starts[i] && strncmp(starts[i], cpu, n) == 0 && (starts[i][n] == '\0' || starts[i][n] == '-'))
            return 1;
    return 0;
}

/* POCL: "... HSTR: <kind>-<triple>-<llvm cpu>" gives "<triple arch>:<llvm cpu>". */
static int derive_pocl(struct kiln_device_desc *d)
{
    const char *h = strstr(d->device_version, "HSTR: ");
    char hstr[128];
    if (!h || sscanf(h + 6, "%127s", hstr) != 1)
        return 0;
    char *dash = strchr(hstr, '-');
    if (!dash)
        return 0;
    const char *cpu = "unknown";
    for (const char *c = dash; c; c = strchr(c + 1, '-'))
        if (name_shows_cpu(d->name, c + 1)) {
            cpu = c + 1;
            break;
        }
    int arch_len = (int)strcspn(dash + 1, "-");
    snprintf(d->arch, sizeof d->arch, "%.*s:%s", arch_len, dash + 1, cpu);
    return 1;
}

int kiln_host_cpu_read(struct kiln_host_cpu *cpu)
{
    memset(cpu, 0, sizeof *cpu);
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d))
        return 0;
    const unsigned top = a;
    memcpy(cpu->vendor, &b, 4);
    memcpy(cpu->vendor + 4, &d, 4);
    memcpy(cpu->vendor + 8, &c, 4);
    if (top < 1 || !__get_cpuid(1, &a, &b, &c, &d))
        return 1;
    /* The extended family adds to family 0Fh; the extended model extends
       families 06h and 0Fh and above. */
    const unsigned base = (a >> 8) & 0xf;
    cpu->family = base == 0xf ? base + ((a >> 20) & 0xff) : base;
    cpu->model = (a >> 4) & 0xf;
    if (base == 0x6 || base == 0xf)
        cpu->model |= ((a >> 16) & 0xf) << 4;
    if (top >= 7 && __get_cpuid_count(7, 0, &a, &b, &c, &d))
        cpu->avx512f = (b >> 16) & 1;
    return 1;
#else
    return 0;
#endif
}

void kiln_device_refine_host_arch(struct kiln_device_desc *d, const struct kiln_host_cpu *cpu)
{
    static const char prefix[] = "x86_64:";
    /* The host's CPU device: POCL's (not its remote devices), of the host's
       vendor, its arch from its LLVM CPU. */
    if (!d || !cpu || d->type != KILN_DEVICE_CPU || strncmp(d->arch, prefix, sizeof prefix - 1) != 0 ||
        strcmp(d->vendor, cpu->vendor) != 0 || !strstr(d->device_version, "HSTR: ") ||
        strstr(d->device_version, "HSTR: remote"))
        return;
    const char *llvm = d->arch + sizeof prefix - 1;
    if (strcmp(cpu->vendor, "AuthenticAMD") != 0 || strncmp(llvm, "znver", 5) == 0)
        return;
    const char *arch = NULL;
    if (cpu->family == 0x19 && cpu->avx512f)
        arch = "znver4"; /* Zen 3, also family 19h, has no AVX-512 */
    else if (cpu->family == 0x1a)
        arch = "znver5";
    if (arch)
        snprintf(d->arch, sizeof d->arch, "%s%s", prefix, arch);
}

void kiln_device_derive_arch(struct kiln_device_desc *d)
{
    if (!d)
        return;
    d->arch[0] = '\0';
    int gpu = d->type == KILN_DEVICE_GPU;
    if (d->type == KILN_DEVICE_CPU) {
        if (!derive_pocl(d))
            GUESS(d, cpu_guesses, d->name, d->vendor);
    } else if (contains_ci(d->vendor, "nvidia") || d->vendor_id == 0x10de) {
        if (d->cc_major > 0)
            snprintf(d->arch, sizeof d->arch, "sm_%d%d", d->cc_major, d->cc_minor);
        else
            GUESS(d, nvidia_guesses, d->name, NULL);
    } else if (gpu && (contains_ci(d->vendor, "advanced micro devices") || contains_ci(d->vendor, "amd") ||
                       d->vendor_id == 0x1002)) {
        if (strncmp(d->name, "gfx", 3) == 0)
            snprintf(d->arch, sizeof d->arch, "%.*s", (int)strcspn(d->name, ":"), d->name);
        else
            GUESS(d, amd_guesses, d->board_name, d->name);
    } else if (gpu && contains_ci(d->vendor, "intel")) {
        GUESS(d, intel_guesses, d->name, NULL);
    }
}
