/* gen_text.c - deterministic text for the wordcount benchmark.
 *
 * usage: gen_text OUT_FILE [MEGABYTES=100] [VOCABULARY=50000] [SEED=42]
 *
 * Writes roughly MEGABYTES of lines of words drawn from a vocabulary of
 * VOCABULARY pronounceable pseudo-words with Zipf (s = 1) frequencies, so a
 * few words are very common and most are rare, like natural text. Frequent
 * words are short (rank -> base-70 syllable number). Lines hold 4..16 words
 * separated by one space, sometimes a tab or two spaces, to exercise the
 * ' '/'\t' splitting. Same arguments -> same bytes. */
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

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s OUT_FILE [MEGABYTES=100] [VOCABULARY=50000] [SEED=42]\n", argv[0]);
        return 2;
    }
    uint64_t bytes = (argc > 2 ? strtoull(argv[2], NULL, 10) : 100) << 20;
    uint32_t vocab = argc > 3 ? (uint32_t)strtoul(argv[3], NULL, 10) : 50000;
    rng_state = argc > 4 ? strtoull(argv[4], NULL, 10) : 42;
    if (vocab < 1) {
        fprintf(stderr, "vocabulary must be >= 1\n");
        return 2;
    }

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
