package org.tserve.metrics;

/**
 * Writes metric values exactly as {@link Double#toString(double)} does (TorchServe's log lines
 * carry Java's double text, e.g. {@code 1.0}, {@code 0.25}), without going through
 * FloatingDecimal for the values the request path produces: whole numbers and counts of
 * micro- or nanoseconds turned into milli-units. Outside the ranges where the decimal text
 * was checked equal to Double.toString (MetricValueTest), Double.toString itself is used.
 */
final class MetricValue {
    /** Double.toString switches to E notation at 10^7. */
    private static final double PLAIN_MAX = 1e7;
    /** {@code n / 10^scale} for {@code n} below this is written digit by digit (checked up to here). */
    static final long SCALED_MAX = 100_000_000L;
    private static final long[] POW10 = {1L, 10L, 100L, 1_000L, 10_000L, 100_000L, 1_000_000L};

    private MetricValue() {
    }

    /** Appends {@code Double.toString(v)}. */
    static StringBuilder append(StringBuilder sb, double v) {
        if (v > -PLAIN_MAX && v < PLAIN_MAX) {
            long l = (long) v;
            if (l == v && (l != 0 || Double.doubleToRawLongBits(v) == 0L)) {   // integral, and not -0.0
                return sb.append(l).append(".0");
            }
        }
        return sb.append(v);
    }

    /** The double {@code n / 10^scale} that callers record (scale 0, 3 or 6). */
    static double value(long n, int scale) {
        return scale == 0 ? (double) n : n / (double) POW10[scale];
    }

    /** Appends {@code Double.toString(n / 10^scale)} for scale 0, 3 or 6. */
    static StringBuilder appendScaled(StringBuilder sb, long n, int scale) {
        if (scale == 0) {
            return append(sb, (double) n);
        }
        long p = POW10[scale];
        // Below 10^-3 Double.toString uses E notation; those and big or negative values take the slow path.
        if (n < 0 || n >= SCALED_MAX || (scale > 3 && n < POW10[scale - 3])) {
            return sb.append(n / (double) p);
        }
        long whole = n / p;
        long frac = n % p;
        sb.append(whole).append('.');
        if (frac == 0) {
            return sb.append('0');
        }
        int digits = scale;
        while (frac % 10 == 0) {   // drop trailing zeros, as Double.toString does
            frac /= 10;
            digits--;
        }
        for (long lead = POW10[digits - 1]; lead > frac; lead /= 10) {   // leading zeros of the fraction
            sb.append('0');
        }
        return sb.append(frac);
    }
}
