/**
 * Batching: gathering queued jobs into batches ({@link org.tserve.wlm.batching.BatchAggregator}), writing them to a
 * worker ({@link org.tserve.wlm.batching.BatchWriter}), the jobs in flight and the responses read back.
 */
package org.tserve.wlm.batching;
