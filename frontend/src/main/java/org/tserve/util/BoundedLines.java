package org.tserve.util;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.function.Consumer;

/**
 * Splits a process's output (workers, pip) into lines as {@code BufferedReader.readLine} does (LF, CR or CRLF),
 * reading fixed-size chunks and holding at most {@code maxLine} bytes of a line: a longer line is
 * passed on cut, with {@link #CUT_MARK}, and its rest up to the next line break is dropped. Memory
 * stays bounded whatever the process writes.
 */
public final class BoundedLines {
    /** Appended to a line that was cut. */
    public static final String CUT_MARK = " [line cut at %d bytes; the rest up to the next line break is dropped]";
    /** Longest line copied from a worker's stdout/stderr to the model log. */
    public static final int MAX_LINE_BYTES = 64 * 1024;

    private BoundedLines() {
    }

    public static void read(InputStream in, int maxLine, Consumer<String> out) throws IOException {
        byte[] chunk = new byte[8192];
        byte[] line = new byte[Math.min(maxLine, 1024)];
        int len = 0;
        boolean dropping = false;
        boolean afterCr = false;
        int n;
        while ((n = in.read(chunk)) >= 0) {
            for (int i = 0; i < n; i++) {
                byte b = chunk[i];
                if (b == '\n' || b == '\r') {
                    if (!(b == '\n' && afterCr)) {   // CRLF ends one line
                        if (!dropping) {
                            out.accept(new String(line, 0, len, StandardCharsets.UTF_8));
                        }
                        len = 0;
                        dropping = false;
                    }
                    afterCr = b == '\r';
                    continue;
                }
                afterCr = false;
                if (dropping) {
                    continue;
                }
                if (len == maxLine) {
                    out.accept(new String(line, 0, len, StandardCharsets.UTF_8) + String.format(CUT_MARK, maxLine));
                    dropping = true;
                    len = 0;
                    continue;
                }
                if (len == line.length) {
                    line = java.util.Arrays.copyOf(line, Math.min(maxLine, line.length * 2));
                }
                line[len++] = b;
            }
        }
        if (len > 0 && !dropping) {
            out.accept(new String(line, 0, len, StandardCharsets.UTF_8));
        }
    }
}
