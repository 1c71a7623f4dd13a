package org.tserve.metrics;

import static org.junit.Assert.assertEquals;

import java.util.SplittableRandom;
import org.junit.Test;

/** The log lines' values must be the bytes Double.toString gives (TorchServe's format). */
public class MetricValueTest {
    private static String plain(double v) {
        return MetricValue.append(new StringBuilder(), v).toString();
    }

    private static String scaled(long n, int scale) {
        return MetricValue.appendScaled(new StringBuilder(), n, scale).toString();
    }

    private static void sameAsJava(long n, int scale) {
        double v = MetricValue.value(n, scale);
        assertEquals("n=" + n + " scale=" + scale, Double.toString(v), scaled(n, scale));
    }

    @Test
    public void wholeNumbersAndSpecialValues() {
        for (double v : new double[] {0, -0.0, 1, -1, 42, 9_999_999, 10_000_000, -10_000_000, 1e15, 0.5, 3.25,
            Double.NaN, Double.POSITIVE_INFINITY, Double.MIN_VALUE, 1e-4}) {
            assertEquals(Double.toString(v), plain(v));
        }
        assertEquals("1.0", plain(1));
        assertEquals("-0.0", plain(-0.0));
        assertEquals("1.0E7", plain(1e7));
    }

    @Test
    public void milliUnitsFromMicrosAndNanosMatchDoubleToString() {
        for (int scale : new int[] {0, 3, 6}) {
            for (long n = 0; n < 20_000; n++) {
                sameAsJava(n, scale);
            }
            for (long n : new long[] {-1, -1000, 999_999, 1_000_000, 1_000_001, 1_002_000, 1_000_020,
                MetricValue.SCALED_MAX - 1, MetricValue.SCALED_MAX, Long.MAX_VALUE / 2}) {
                sameAsJava(n, scale);
            }
            SplittableRandom r = new SplittableRandom(scale);
            for (int i = 0; i < 200_000; i++) {
                sameAsJava(r.nextLong(MetricValue.SCALED_MAX + 1000), scale);
            }
        }
        assertEquals("0.25", scaled(250, 3));
        assertEquals("1.005", scaled(1005, 3));
        assertEquals(Double.toString(0.001), scaled(1, 3));
        assertEquals("12.34", scaled(12_340_000, 6));
    }
}
