package org.tserve.http;

/** Which APIs a bound address serves. */
public enum ConnectorType {
    INFERENCE, MANAGEMENT, METRICS,
    /** inference_address == management_address: both APIs on one port. */
    INFERENCE_AND_MANAGEMENT
}
