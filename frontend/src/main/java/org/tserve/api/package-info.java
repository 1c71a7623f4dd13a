/**
 * What the REST and gRPC front ends answer in the same shape (TorchServe's describe and list JSON), so
 * that neither front end reaches into the other.
 */
package org.tserve.api;
