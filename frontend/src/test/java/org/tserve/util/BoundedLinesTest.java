package org.tserve.util;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.junit.Test;

public class BoundedLinesTest {
    private static List<String> lines(String text, int max) throws Exception {
        List<String> out = new ArrayList<>();
        BoundedLines.read(new ByteArrayInputStream(text.getBytes(StandardCharsets.UTF_8)), max, out::add);
        return out;
    }

    @Test
    public void splitsLikeReadLine() throws Exception {
        assertEquals(List.of("a", "b", "c", "", "d", "é"), lines("a\nb\r\nc\r\rd\né", 100));
        assertEquals(List.of(), lines("", 100));
    }

    @Test
    public void longLinesAreCutAndMarked() throws Exception {
        List<String> l = lines("0123456789abc\nnext\n", 10);
        assertEquals(2, l.size());
        assertEquals("0123456789" + String.format(BoundedLines.CUT_MARK, 10), l.get(0));
        assertEquals("next", l.get(1));
    }

    /** 1 GiB without a line break passes through in bounded memory (no buffer of the whole line). */
    @Test
    public void endlessOutputStaysBounded() throws Exception {
        long total = 1L << 30;
        InputStream endless = new InputStream() {
            long left = total;

            @Override
            public int read() {
                return left-- > 0 ? 'x' : -1;
            }

            @Override
            public int read(byte[] b, int off, int len) {
                if (left <= 0) {
                    return -1;
                }
                int n = (int) Math.min(len, left);
                java.util.Arrays.fill(b, off, off + n, (byte) 'x');
                left -= n;
                return n;
            }
        };
        List<String> out = new ArrayList<>();
        BoundedLines.read(endless, BoundedLines.MAX_LINE_BYTES, out::add);
        assertEquals(1, out.size());
        assertTrue(out.get(0).endsWith(String.format(BoundedLines.CUT_MARK, BoundedLines.MAX_LINE_BYTES)));
    }
}
