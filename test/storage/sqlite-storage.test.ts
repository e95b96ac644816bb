import { sqlite } from '../support/backends.js';
import { storageContract } from './storage-contract.js';

storageContract(sqlite);
