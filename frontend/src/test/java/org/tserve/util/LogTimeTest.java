package org.tserve.util;

import static org.junit.Assert.assertEquals;

import java.time.Instant;
import java.time.LocalDateTime;
import java.time.ZoneId;
import java.time.format.DateTimeFormatter;
import org.junit.Test;

public class LogTimeTest {
    private static final DateTimeFormatter JAVA = DateTimeFormatter.ofPattern("yyyy-MM-dd'T'HH:mm:ss,SSS");

    private static String expected(long millis) {
        return LocalDateTime.ofInstant(Instant.ofEpochMilli(millis), ZoneId.systemDefault()).format(JAVA);
    }

    @Test
    public void sameTextAsDateTimeFormatterAcrossMillisAndSeconds() {
        long base = 1_764_700_000_000L;
        for (long t : new long[] {base, base + 1, base + 9, base + 10, base + 99, base + 100, base + 999,
            base + 1000, base + 1001, base, base + 86_400_000L + 5, 0, 999, 1000, -1, -1001}) {
            assertEquals("millis " + t, expected(t), LogTime.append(new StringBuilder(), t).toString());
        }
    }
}
