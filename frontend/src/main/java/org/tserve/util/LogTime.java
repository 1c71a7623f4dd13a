package org.tserve.util;

import java.time.Instant;
import java.time.LocalDateTime;
import java.time.ZoneId;
import java.time.format.DateTimeFormatter;

/**
 * The log lines' local time, {@code yyyy-MM-dd'T'HH:mm:ss,SSS}. Every log line needs one, so the
 * part up to the comma is formatted once per second and shared; each line only appends its
 * three millisecond digits (DateTimeFormatter per line was a visible cost on the request path).
 */
public final class LogTime {
    private static final DateTimeFormatter SECOND = DateTimeFormatter.ofPattern("yyyy-MM-dd'T'HH:mm:ss,");

    /** One formatted second, immutable, so threads can share it through a volatile field. */
    private static final class Second {
        final long epochSecond;
        final String text;

        Second(long epochSecond, String text) {
            this.epochSecond = epochSecond;
            this.text = text;
        }
    }

    private static volatile Second last = new Second(Long.MIN_VALUE, "");

    private LogTime() {
    }

    /** Appends the local time of {@code epochMillis}. */
    public static StringBuilder append(StringBuilder sb, long epochMillis) {
        long sec = Math.floorDiv(epochMillis, 1000L);
        int ms = (int) Math.floorMod(epochMillis, 1000L);
        Second s = last;
        if (s.epochSecond != sec) {
            s = new Second(sec, LocalDateTime.ofInstant(Instant.ofEpochSecond(sec), ZoneId.systemDefault()).format(SECOND));
            last = s;
        }
        sb.append(s.text);
        if (ms < 100) {
            sb.append('0');
        }
        if (ms < 10) {
            sb.append('0');
        }
        return sb.append(ms);
    }

    /** Appends the local time now. */
    public static StringBuilder appendNow(StringBuilder sb) {
        return append(sb, System.currentTimeMillis());
    }
}
