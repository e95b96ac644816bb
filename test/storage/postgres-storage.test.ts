import { backends, POSTGRES_NOT_RUN_NOTICE, postgres } from '../support/backends.js';
import { storageContract } from './storage-contract.js';

if (backends.includes(postgres)) storageContract(postgres);
else process.stderr.write(POSTGRES_NOT_RUN_NOTICE);
