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
        sb.append(name).append('.').append(unit).append(':').append(value).append("|#");
        boolean first = true;
        for (Map.Entry<String, String> d : dims.entrySet()) {
            if (d.getKey().equalsIgnoreCase("hostname")) {
                continue;
            }
            if (!first) {
                sb.append(',');
            }
            first = false;
            sb.append(d.getKey()).append(':').append(d.getValue());
        }
        sb.append("|#hostname:").append(hostname);
        if (requestId != null && !requestId.isEmpty()) {
            sb.append(",requestID:").append(requestId);
        }
        sb.append(",timestamp:").append(epochSeconds);
        return sb.toString();
    }
}
