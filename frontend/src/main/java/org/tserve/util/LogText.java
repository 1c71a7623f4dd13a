package org.tserve.util;

/**
 * Keeps log lines one line. {@link #appendOneLine} is what every log line goes through (CR and
 * LF become spaces, as before; other characters that some readers take as a line break or that
 * move the cursor become {@code \\uXXXX}); {@link #quote} is for client-chosen strings in a
 * message: quoted, escaped and shortened, so they cannot pose as another line or field.
 */
public final class LogText {
    /** Longest client-chosen string {@link #quote} keeps (the rest is counted, not written). */
    public static final int MAX_QUOTED = 200;

    private LogText() {
    }

    /** True for characters that may end a line or control a terminal (tab excepted). */
    static boolean isControl(char c) {
        return (c < 0x20 && c != '\t') || (c >= 0x7f && c <= 0x9f) || c == '\u2028' || c == '\u2029';
    }

    /** Appends {@code s} on one line: CR/LF as spaces, other control characters escaped. */
    public static StringBuilder appendOneLine(StringBuilder sb, String s) {
        if (s == null) {
            return sb.append("null");
        }
        int n = s.length();
        int i = 0;
        while (i < n && !isControl(s.charAt(i))) {
            i++;
        }
        if (i == n) {
            return sb.append(s);
        }
        sb.append(s, 0, i);
        for (; i < n; i++) {
            char c = s.charAt(i);
            if (c == '\n' || c == '\r') {
                sb.append(' ');
            } else if (isControl(c)) {
                appendEscape(sb, c);
            } else {
                sb.append(c);
            }
        }
        return sb;
    }

    /** {@code s} on one line (see {@link #appendOneLine}). */
    public static String oneLine(String s) {
        return appendOneLine(new StringBuilder(), s).toString();
    }

    /**
     * A client-chosen string for a log line or error message: in double quotes, with quotes,
     * backslashes and control characters escaped, cut at {@link #MAX_QUOTED} characters.
     */
    public static String quote(String s) {
        if (s == null) {
            return "null";
        }
        int n = Math.min(s.length(), MAX_QUOTED);
        StringBuilder sb = new StringBuilder(n + 16).append('"');
        for (int i = 0; i < n; i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"':
                    sb.append("\\\"");
                    break;
                case '\\':
                    sb.append("\\\\");
                    break;
                case '\n':
                    sb.append("\\n");
                    break;
                case '\r':
                    sb.append("\\r");
                    break;
                case '\t':
                    sb.append("\\t");
                    break;
                default:
                    if (isControl(c)) {
                        appendEscape(sb, c);
                    } else {
                        sb.append(c);
                    }
            }
        }
        sb.append('"');
        if (s.length() > n) {
            sb.append("...(").append(s.length()).append(" chars)");
        }
        return sb.toString();
    }

    private static void appendEscape(StringBuilder sb, char c) {
        sb.append("\\u");
        String hex = Integer.toHexString(c);
        for (int k = hex.length(); k < 4; k++) {
            sb.append('0');
        }
        sb.append(hex);
    }
}
