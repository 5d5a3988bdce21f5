/* gen_text.c - deterministic text for the wordcount benchmark.
 *
 * usage: gen_text OUT_FILE [MEGABYTES=100] [VOCABULARY=50000] [SEED=42]
 *        gen_text --help
 *
 * Writes roughly MEGABYTES of lines of words drawn from a vocabulary of
 * VOCABULARY pronounceable pseudo-words with Zipf (s = 1) frequencies, so a
 * few words are very common and most are rare, like natural text. Frequent
 * words are short (rank -> base-70 syllable number). Lines hold 4..16 words
 * separated by one space, sometimes a tab or two spaces, to exercise the
 * ' '/'\t' splitting. Same arguments -> same bytes. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state;

static uint64_t rng_next(void) /* splitmix64 */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double rng_unit(void) { return (double)(rng_next() >> 11) * (1.0 / 9007199254740992.0); }

static const char consonants[] = "bdfgklmnprstvz";
static const char vowels[] = "aeiou";

/* Word for a vocabulary id: base-70 digits, each a consonant+vowel syllable.
 * Different ids give different strings (length fixes the digit count). */
static size_t make_word(uint32_t id, char *out)
{
    char tmp[32];
    size_t n = 0;
    do {
        uint32_t d = id % 70;
        id /= 70;
        tmp[n++] = vowels[d % 5];
        tmp[n++] = consonants[d / 5];
    } while (id);
    for (size_t i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    return n;
}

static const char usage[] =
    "usage: gen_text OUT_FILE [MEGABYTES=100] [VOCABULARY=50000] [SEED=42]\n"
    "\n"
    "Writes about MEGABYTES MB of deterministic text to OUT_FILE: lines of 4..16\n"
    "words drawn with Zipf frequencies from VOCABULARY pseudo-words (SEED picks\n"
    "the sequence; the same arguments give the same bytes). Input for wordcount.\n";

/* A whole decimal number in [min, max], or false. */
static bool parse_count(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    char *end;
    if (!*s || *s == '-' || *s == '+')
        return false;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v < min || v > max)
        return false;
    *out = v;
    return true;
}

int main(int argc, char **argv)
{
    if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        fputs(usage, stdout);
        return 0;
    }
    for (int i = 1; i < argc; i++)
        if (argv[i][0] == '-' && argv[i][1]) { /* no flags: never a file named --help */
            fprintf(stderr, "gen_text: unknown flag '%s' (see --help)\n", argv[i]);
            return 2;
        }
    if (argc < 2 || argc > 5) {
        fputs(usage, stderr);
        return 2;
    }
    uint64_t mb = 100, vocab64 = 50000, seed = 42;
    if ((argc > 2 && !parse_count(argv[2], 1, UINT64_MAX >> 20, &mb)) ||
        (argc > 3 && !parse_count(argv[3], 1, UINT32_MAX, &vocab64)) ||
        (argc > 4 && !parse_count(argv[4], 0, UINT64_MAX, &seed))) {
        fprintf(stderr, "gen_text: MEGABYTES and VOCABULARY must be whole numbers >= 1, SEED >= 0 (see --help)\n");
        return 2;
    }
    uint64_t bytes = mb << 20;
    uint32_t vocab = (uint32_t)vocab64;
    rng_state = seed;

    /* Zipf CDF over ranks 1..vocab. */
    double *cdf = malloc(sizeof *cdf * vocab);
    char (*words)[16] = malloc(sizeof *words * vocab);
    uint8_t *lens = malloc(vocab);
    if (!cdf || !words || !lens)
        return 1;
    double sum = 0;
    for (uint32_t r = 0; r < vocab; r++)
        cdf[r] = (sum += 1.0 / (double)(r + 1));
    for (uint32_t r = 0; r < vocab; r++)
        cdf[r] /= sum;
    /* Rank -> word: frequent words are short. */
    for (uint32_t r = 0; r < vocab; r++)
        lens[r] = (uint8_t)make_word(r, words[r]);

    FILE *f = fopen(argv[1], "w");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    static char buf[1 << 20];
    setvbuf(f, buf, _IOFBF, sizeof buf);
    uint64_t written = 0, nwords = 0, nlines = 0;
    char line[16 * 20 + 4];
    while (written < bytes) {
        int k = 4 + (int)(rng_next() % 13);
        size_t n = 0;
        for (int i = 0; i < k; i++) {
            if (i) {
                uint64_t s = rng_next() % 50;
                if (s == 0)
                    line[n++] = '\t';
                else if (s == 1) {
                    line[n++] = ' ';
                    line[n++] = ' ';
                } else
                    line[n++] = ' ';
            }
            double u = rng_unit();
            uint32_t lo = 0, hi = vocab - 1;
            while (lo < hi) {
                uint32_t mid = lo + (hi - lo) / 2;
                if (cdf[mid] < u)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            memcpy(line + n, words[lo], lens[lo]);
            n += lens[lo];
        }
        line[n++] = '\n';
        fwrite(line, 1, n, f);
        written += n;
        nwords += (uint64_t)k;
        nlines++;
    }
    if (fclose(f) != 0) {
        perror(argv[1]);
        return 1;
    }
    printf("%llu bytes %llu lines %llu words\n", (unsigned long long)written,
           (unsigned long long)nlines, (unsigned long long)nwords);
    free(cdf);
    free(words);
    free(lens);
    return 0;
}
