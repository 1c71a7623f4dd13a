package org.tserve.metrics;

import java.util.Map;

/**
 * TorchServe's metric log line: {@code Name.Unit:value|#Dim:val,...|#hostname:h,timestamp:epoch}
 * (backend metrics add {@code ,requestID:ids} before the timestamp). The host dimension is not
 * repeated among the dimensions: it is the {@code hostname} field.
 */
public final class MetricLogLine {
    private MetricLogLine() {
    }

    public static String format(String name, String unit, double value, Map<String, String> dims,
                                String hostname, String requestId, long epochSeconds) {
        StringBuilder sb = new StringBuilder(96);
        MetricValue.append(sb.append(head(name, unit)), value);
        sb.append(dimensions(dims, hostname));
        if (requestId != null && !requestId.isEmpty()) {
            sb.append(",requestID:").append(requestId);
        }
        sb.append(",timestamp:").append(epochSeconds);
        return sb.toString();
    }

    /** The part before the value: {@code Name.Unit:}. */
    static String head(String name, String unit) {
        return org.tserve.util.LogText.oneLine(name + '.' + unit) + ':';
    }

    /** The part after the value up to the request id: {@code |#Dim:val,...|#hostname:h}. */
    static String dimensions(Map<String, String> dims, String hostname) {
        StringBuilder sb = new StringBuilder(64).append("|#");
        boolean first = true;
        for (Map.Entry<String, String> d : dims.entrySet()) {
            if (d.getKey().equalsIgnoreCase("hostname")) {
                continue;
            }
            if (!first) {
                sb.append(',');
            }
            first = false;
            // names and values may come from a handler or an archive: one line, whatever they hold
            org.tserve.util.LogText.appendOneLine(sb, d.getKey()).append(':');
            org.tserve.util.LogText.appendOneLine(sb, d.getValue());
        }
        return sb.append("|#hostname:").append(hostname).toString();
    }
}
