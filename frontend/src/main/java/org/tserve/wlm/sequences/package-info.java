/**
 * Stateful sequences ({@code sequenceBatching}): sequence ids, their idle timeouts and the jobs of one sequence kept on
 * one worker in order.
 */
package org.tserve.wlm.sequences;
