/**
 * Batching: gathering queued jobs into batches ({@link org.tserve.wlm.batching.BatchAggregator}), writing them to a
 * worker ({@link org.tserve.wlm.batching.BatchWriter}), the jobs in flight and the responses read back
 * ({@link org.tserve.wlm.batching.ResponseReader}). It sees the model through
 * {@link org.tserve.wlm.batching.BatchModel} and reports to a {@code WlmListener}; it uses link, protocol and api only.
 */
package org.tserve.wlm.batching;
